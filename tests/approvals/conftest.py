"""The ``store`` fixture of the approval ledger tests: InMemoryStore and FileStore."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.stores.base import AtomicStore


@pytest.fixture(params=["memory", "file"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AtomicStore]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        async with FileStore.open(tmp_path / "state.json") as file_store:
            yield file_store

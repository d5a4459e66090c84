"""Fixtures of the run-store tests: a backing store (memory and file) and a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from run_helpers import START

from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.stores.base import ConditionalStore
from oma_actors.testing import FakeClock


@pytest.fixture(params=["memory", "file"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConditionalStore]:
    """An empty backing store: an ``InMemoryStore``, then a ``FileStore``."""
    if request.param == "memory":
        yield InMemoryStore()
    else:
        async with FileStore.open(tmp_path / "runs.json") as file_store:
            yield file_store


@pytest.fixture
def clock() -> FakeClock:
    """A clock at ``START`` that moves only when the test moves it."""
    return FakeClock(START)

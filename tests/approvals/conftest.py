"""The ``store`` fixture of the approval ledger tests: every AtomicStore backend.

InMemoryStore and FileStore, plus SQLite, PostgreSQL and Redis on a fresh file, table or key
prefix per test (removed afterwards). A service that is unreachable skips its cases locally and
fails them under ``CI=true`` (``service_kit``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from service_kit import FreshStores

from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.stores.base import AtomicStore


@pytest.fixture(params=["memory", "file", "sqlite", "postgres", "redis"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, fresh_stores: FreshStores
) -> AsyncIterator[AtomicStore]:
    if request.param == "memory":
        yield InMemoryStore()
    elif request.param == "file":
        async with FileStore.open(tmp_path / "state.json") as file_store:
            yield file_store
    elif request.param == "sqlite":
        yield await fresh_stores.sqlite()
    elif request.param == "postgres":
        yield await fresh_stores.postgres()
    else:
        yield await fresh_stores.redis()

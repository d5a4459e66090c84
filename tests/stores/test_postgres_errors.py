"""Every asyncpg failure is a StoreError, InternalClientError included (issue 24, item 8).

During a PostgreSQL restart asyncpg can raise ``InternalClientError``, which is neither a
``PostgresError`` nor an ``InterfaceError``: it escaped the store untyped. No server is needed:
the pool is a stand-in whose query fails the way asyncpg's does.
"""

from __future__ import annotations

import asyncpg
import pytest

from oma_actors.errors import StoreError
from oma_actors.stores.postgres import PostgresStore


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.InternalClientError("protocol state"),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.CannotConnectNowError("the database system is shutting down"),
    ],
)
async def test_asyncpg_failures_are_store_errors(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    store = PostgresStore("postgresql://oma@127.0.0.1:1/none")

    class Pool:
        async def fetchrow(self, *args: object) -> None:
            raise error

    async def connected() -> Pool:
        return Pool()

    monkeypatch.setattr(store, "_connected", connected)
    with pytest.raises(StoreError) as caught:
        await store.get("k")
    assert caught.value.__cause__ is error

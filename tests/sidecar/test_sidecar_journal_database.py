"""The sidecar keeps run journals in its SQLite and PostgreSQL stores (D15, issue 18 item 5).

A run on a database store is journal-first (its turns saved by journal appends, fenced by its
lease on PostgreSQL), ``WatchRun(journal=true)`` is the database journal seq for seq, and
``DeleteRun`` removes the run's rows. On PostgreSQL a sidecar that does not execute the run
follows its journal by notification: with a 30 s heartbeat and poll interval (so a timer would
look only every 30 s) the stream still ends within the test's 20 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from sidecar_helpers import TOKEN
from test_sidecar_crash import finished
from test_sidecar_journal import config, echo_run, run_to_end, saves
from test_sidecar_journal_watch import watch_journal

from oma_actors.journal import PostgresRunJournal, SqliteRunJournal
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.journal_watch import JournalWatch
from sidecar.server import Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from oma_actors.journal.sql import SqlRunJournal


@contextlib.asynccontextmanager
async def sidecar(store_uri: str, **overrides: Any) -> AsyncIterator[SidecarClient]:
    async with (
        Sidecar(config(store_uri, **overrides)) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        yield client


async def rows_of(journal: SqlRunJournal, run_id: str) -> list[Any]:
    try:
        return await journal.read_run(run_id)
    finally:
        await journal.close()


async def test_a_run_on_sqlite_keeps_its_journal_in_the_database(tmp_path: Path) -> None:
    database = tmp_path / "state.db"
    async with sidecar(f"sqlite://{database}") as client:
        assert "journal" in (await client.server_info()).capabilities
        events = await run_to_end(client, echo_run("sq-1"))
        watched = await asyncio.wait_for(watch_journal(client, "sq-1"), 10)
        stored = await rows_of(SqliteRunJournal(database), "sq-1")
        assert "journal" in {save["mode"] for save in saves(events)}  # journal-first
        assert [e.seq for e in watched] == [e.seq for e in stored]
        assert [e.type for e in watched] == [e.type for e in stored]
        assert stored[-1].type == "run/end"
        await client.delete_run("sq-1")
    assert await rows_of(SqliteRunJournal(database), "sq-1") == []


@pytest.fixture
async def shared_store(postgres_dsn: str) -> AsyncIterator[tuple[str, str, str]]:
    """A ``postgresql://`` URI on a fresh table; the table and its journal dropped after."""
    import asyncpg

    table = f"oma_test_sj_{uuid.uuid4().hex[:12]}"
    yield f"{postgres_dsn}?table={table}", postgres_dsn, table
    connection = await asyncpg.connect(postgres_dsn)
    try:
        for name in (table, f"{table}_journal"):
            await connection.execute(f'DROP TABLE IF EXISTS "{name}"')
    finally:
        await connection.close()


async def test_postgres_journal_is_followed_by_notification_on_another_sidecar(
    shared_store: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, dsn, table = shared_store
    # No timer looks at the journal more often than every 30 s: only notifications can end
    # the watch within 20 s.
    real_init = JournalWatch.__init__

    def slow_init(self: JournalWatch, **kwargs: Any) -> None:
        real_init(self, **{**kwargs, "poll_s": 30.0})

    monkeypatch.setattr(JournalWatch, "__init__", slow_init)
    slow = {"heartbeat_s": 30.0, "lease_ttl_s": 10.0}
    async with (
        sidecar(uri, owner_id="runner", **slow) as runner,
        sidecar(uri, owner_id="watcher", **slow) as watcher,
    ):
        await runner.start_run(echo_run("pg-1"))
        watched = await asyncio.wait_for(watch_journal(watcher, "pg-1"), 20)
        progress = await asyncio.wait_for(finished(runner, "pg-1"), 10)
        run = await runner.get_run("pg-1")
        stored = await rows_of(PostgresRunJournal(dsn, store_table=table), "pg-1")
        assert run.status == pb.RUN_STATUS_COMPLETED
        assert [e.seq for e in watched] == [e.seq for e in stored]
        assert watched[-1].type == "run/end"
        # The leased run was journal-first on its database: turns saved by fenced appends.
        assert "journal" in {save["mode"] for save in saves(progress)}
        await runner.delete_run("pg-1")
    assert await rows_of(PostgresRunJournal(dsn, store_table=table), "pg-1") == []

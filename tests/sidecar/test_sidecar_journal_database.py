"""The sidecar keeps run journals in its SQLite and PostgreSQL stores (D15, issue 18 item 5).

A run on a database store is journal-first (its turns saved by journal appends, fenced by its
lease on PostgreSQL), ``WatchRun(journal=true)`` is the database journal seq for seq, and
``DeleteRun`` removes the run's rows. On PostgreSQL a sidecar that does not execute the run
follows its journal by notification: with an hour's heartbeat and poll interval it reads the
journal only when notified (counted).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import TOKEN
from test_sidecar_crash import finished
from test_sidecar_journal import config, echo_run, run_to_end, saves
from test_sidecar_journal_watch import watch_journal

from oma_actors.journal import PostgresRunJournal, SqliteRunJournal
from oma_actors.journal.sqlite import JOURNAL_TABLE
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient, error_reason
from sidecar.journal_watch import JournalTail, JournalWatch
from sidecar.journals import _Listener
from sidecar.server import Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from oma_actors.journal import JournalEvent
    from oma_actors.journal.sql import SqlRunJournal

HOUR = 3600.0
HANG_GUARD = 60  # seconds: only against a hang, never the assertion


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
        events = await run_to_end(client, echo_run("sq-1"), progress=True)
        watched = await asyncio.wait_for(watch_journal(client, "sq-1"), 10)
        stored = await rows_of(SqliteRunJournal(database), "sq-1")
        assert "journal" in {save["mode"] for save in saves(events)}  # journal-first
        assert [e.seq for e in watched] == [e.seq for e in stored]
        assert [e.type for e in watched] == [e.type for e in stored]
        assert stored[-1].type == "run/end"
        await client.delete_run("sq-1")
    assert await rows_of(SqliteRunJournal(database), "sq-1") == []


async def test_only_events_really_lost_are_a_gap(tmp_path: Path) -> None:
    # A run's journal seqs have no hole; one cut out of the table behind the sidecar's back is
    # an event really lost: reported as a gap (or SEQ_EXPIRED without allow_gap), exactly it.
    database = tmp_path / "state.db"
    async with sidecar(f"sqlite://{database}") as client:
        await run_to_end(client, echo_run("sq-gap"))
        whole = await asyncio.wait_for(watch_journal(client, "sq-gap"), 10)
        assert [e.seq for e in whole] == list(range(1, len(whole) + 1))  # no hole, no gap
        lost = whole[len(whole) // 2].seq
        with contextlib.closing(sqlite3.connect(database)) as db, db:
            db.execute(
                f"DELETE FROM {JOURNAL_TABLE} WHERE run_id = ? AND seq = ?", ("sq-gap", lost)
            )
        told = await asyncio.wait_for(watch_journal(client, "sq-gap", allow_gap=True), 10)
        gaps = [(e.seq, e.gap.from_seq, e.gap.to_seq) for e in told if e.type == "gap"]
        assert gaps == [(lost, lost, lost)]
        assert [e.seq for e in told if e.type != "gap"] == [e.seq for e in whole if e.seq != lost]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await asyncio.wait_for(watch_journal(client, "sq-gap", allow_gap=False), 10)
        assert refused.value.code() == grpc.StatusCode.OUT_OF_RANGE
        assert error_reason(refused.value) == "SEQ_EXPIRED"
        # A watcher resuming right after the lost event is told nothing more.
        after = await asyncio.wait_for(watch_journal(client, "sq-gap", after_seq=lost), 10)
        assert [e.seq for e in after] == [e.seq for e in whole if e.seq > lost]


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
    # No timer looks at the journal: the poll interval and the heartbeat are an hour, so only a
    # notification wakes the watcher (without the listener the watch hangs and the guard below
    # fails it). Counted, not timed: before run/end the watcher reads the journal once at the
    # start and once per notification at most.
    real_init = JournalWatch.__init__

    def slow_init(self: JournalWatch, **kwargs: Any) -> None:
        real_init(self, **{**kwargs, "poll_s": HOUR})

    monkeypatch.setattr(JournalWatch, "__init__", slow_init)
    notified: list[str] = []
    real_notified = _Listener.notified

    def counting_notified(self: _Listener, run_id: str) -> None:
        notified.append(run_id)
        real_notified(self, run_id)

    monkeypatch.setattr(_Listener, "notified", counting_notified)
    # The reads of the watch's own tails (a Run's last_event_seq reads the journal too).
    watched_tails: set[int] = set()
    real_follow = JournalWatch._follow

    def following(self: JournalWatch, log: Any, tail: JournalTail, *rest: Any) -> Any:
        watched_tails.add(id(tail))
        return real_follow(self, log, tail, *rest)

    monkeypatch.setattr(JournalWatch, "_follow", following)
    reads: list[int] = []
    real_read = JournalTail.read

    async def counting_read(
        self: JournalTail, after_seq: int, *, final: bool = False
    ) -> list[JournalEvent]:
        if id(self) in watched_tails:
            reads.append(after_seq)
        return await real_read(self, after_seq, final=final)

    monkeypatch.setattr(JournalTail, "read", counting_read)
    slow = {"heartbeat_s": HOUR, "lease_ttl_s": 10.0}
    async with (
        sidecar(uri, owner_id="runner", **slow) as runner,
        sidecar(uri, owner_id="watcher", **slow) as watcher,
    ):
        await runner.start_run(echo_run("pg-1"))
        watched = await asyncio.wait_for(watch_journal(watcher, "pg-1"), HANG_GUARD)
        progress = await asyncio.wait_for(finished(runner, "pg-1", progress=True), HANG_GUARD)
        run = await runner.get_run("pg-1")
        stored = await rows_of(PostgresRunJournal(dsn, store_table=table), "pg-1")
        assert run.status == pb.RUN_STATUS_COMPLETED
        assert [e.seq for e in watched] == [e.seq for e in stored]
        assert watched[-1].type == "run/end"
        # The leased run was journal-first on its database: turns saved by fenced appends.
        assert "journal" in {save["mode"] for save in saves(progress)}
        # Every read of the journal before its end came from a notification of the run's
        # commits (or opened the watch); after run/end the watcher only waits for the record.
        assert "pg-1" in notified
        before_end = [after for after in reads if after < watched[-1].seq]
        assert 1 <= len(before_end) <= notified.count("pg-1") + 1, (reads, notified)
        await runner.delete_run("pg-1")
    assert await rows_of(PostgresRunJournal(dsn, store_table=table), "pg-1") == []


async def test_a_watch_refused_for_its_types_gives_the_database_journal_back(
    tmp_path: Path,
) -> None:
    # WatchRun with a type no journal holds is INVALID_ARGUMENT; the database journal it had
    # taken stayed held (never closed, whatever the idle bound), one more per refused watch.
    database = tmp_path / "state.db"
    async with Sidecar(config(f"sqlite://{database}")) as server:
        async with SidecarClient(server.address, TOKEN) as client:
            await run_to_end(client, echo_run("sq-types"))
            for _ in range(3):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await watch_journal(client, "sq-types", types=["no/such"])
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert server.journals is not None
        assert [shared.users for shared in server.journals._databases.values()] == [0]

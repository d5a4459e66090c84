"""Every ``PostgresRunJournal`` of one database shares one bounded pool and one set of batches.

200 runs each opening ``open_journal(uri)`` on one database failed with "too many clients"
when every journal had a pool of its own. Each test here gets a database of its own and counts
its connections in ``pg_stat_activity`` from a connection to another database (so the count is
the journals' alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from oma_actors.errors import StoreError
from oma_actors.journal import PostgresRunJournal, open_journal
from oma_actors.journal import postgres as journal_postgres
from oma_actors.journal.errors import JournalClosedError
from oma_actors.stores.postgres import open_pool as real_open_pool
from oma_actors.testing.journal_contract import event, events

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

JOURNALS = 200
BOUND = 4
"""``PostgresRunJournal``'s default ``max_connections``: the bound for one DSN, table, loop."""


class Database:
    """A database of this test's own, and a connection to ANOTHER one that counts its clients."""

    def __init__(self, dsn: str, name: str, watcher: asyncpg.Connection) -> None:
        self.dsn = dsn
        self.name = name
        self._watcher = watcher
        self._watching = asyncio.Lock()  # one query at a time on the watcher (and a sampler)

    async def connections(self) -> int:
        """How many clients are connected to this database now."""
        async with self._watching:
            count = await self._watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", self.name
            )
        return int(count)

    async def until_no_connections(self, tries: int = 500) -> int:
        """Wait (a backend exits shortly after its client closed) until none is left, up to
        ``tries`` looks 20 ms apart; the count last seen."""
        count = await self.connections()
        for _ in range(tries):
            if not count:
                break
            await asyncio.sleep(0.02)
            count = await self.connections()
        return count

    async def fetchval(self, query: str) -> object:
        """One query on this database, on a connection of its own (closed before returning)."""
        connection = await asyncpg.connect(self.dsn)
        try:
            return await connection.fetchval(query)
        finally:
            await connection.close()


def opened(uri: str) -> PostgresRunJournal:
    """``open_journal(uri)``, as every run of the explorer's repro opened its journal."""
    journal = open_journal(uri)
    assert isinstance(journal, PostgresRunJournal)
    return journal


@pytest.fixture
async def database(postgres_dsn: str) -> AsyncIterator[Database]:
    name = f"oma_shared_pool_{uuid.uuid4().hex[:12]}"
    watcher = await asyncpg.connect(postgres_dsn)
    try:
        await watcher.execute(f'CREATE DATABASE "{name}"')
        try:
            yield Database(
                urlunsplit(urlsplit(postgres_dsn)._replace(path=f"/{name}")), name, watcher
            )
        finally:
            await watcher.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await watcher.close()


@contextlib.asynccontextmanager
async def peak_of(count: Callable[[], Awaitable[int]]) -> AsyncIterator[list[int]]:
    """Samples ``count()`` until the block ends; the list's one item is the highest seen."""
    peak = [0]
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], await count())
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    try:
        yield peak
    finally:
        stop.set()
        await sampler


async def test_200_journals_of_one_database_share_a_bounded_pool_and_their_batches(
    database: Database,
) -> None:
    journals = [opened(database.dsn) for _ in range(JOURNALS)]
    closed = False
    try:
        async with peak_of(database.connections) as peak:
            await asyncio.gather(
                *(j.append(events(f"run-{i}", [1, 2])) for i, j in enumerate(journals))
            )
            await asyncio.gather(
                *(j.append_now([event(f"run-{i}", 3)]) for i, j in enumerate(journals))
            )
            read = await asyncio.gather(*(j.read_run(f"run-{i}") for i, j in enumerate(journals)))
            # Every journal is open and has appended and read: its connections are all there.
            open_now = await database.connections()
        assert 1 <= open_now <= BOUND, f"{open_now} connections for {JOURNALS} journals"
        assert peak[0] <= BOUND, f"{peak[0]} connections at the peak"
        assert all([e.seq for e in found] == [1, 2, 3] for found in read)
        assert all(j.batches == journals[0].batches for j in journals)  # one set of batches
        await asyncio.gather(*(j.close() for j in journals))
        closed = True
        assert await database.until_no_connections() == 0  # the last close released them all
    finally:
        if not closed:
            await asyncio.gather(*(j.close() for j in journals), return_exceptions=True)
    assert await database.fetchval("SELECT count(*) FROM oma_kv_journal") == JOURNALS * 3
    # The runs shared transactions (a journal each would have made one per append: 400).
    transactions = await database.fetchval("SELECT count(DISTINCT xmin::text) FROM oma_kv_journal")
    assert isinstance(transactions, int)
    assert transactions <= 10, f"{transactions} transactions for {JOURNALS * 2} appends"


async def test_closing_one_journal_leaves_the_others_working(database: Database) -> None:
    first = PostgresRunJournal(database.dsn)
    second = opened(database.dsn)
    try:
        await first.append([event("a", 1)])
        await second.append([event("b", 1)])
        await first.close()
        with pytest.raises(JournalClosedError):
            await first.append([event("a", 2)])
        await second.append([event("b", 2)])
        assert [e.seq for e in await second.read_run("b")] == [1, 2]
        assert [e.seq for e in await second.read_run("a")] == [1]
        assert await database.connections() >= 1
        # A journal opened now joins the open share; closing it leaves the other open too.
        third = PostgresRunJournal(database.dsn)
        await third.append([event("c", 1)])
        await third.close()
        await second.append([event("b", 3)])
        assert [e.seq for e in await second.read_run("b")] == [1, 2, 3]
    finally:
        await first.close()
        await second.close()
    assert await database.until_no_connections() == 0


async def test_a_close_commits_its_own_queued_appends_now_and_waits_for_them(
    database: Database,
) -> None:
    """A long window: the closing journal's batch is committed at once, not after 60 s."""
    closing = PostgresRunJournal(database.dsn, flush_interval_ms=60_000)
    staying = PostgresRunJournal(database.dsn, flush_interval_ms=60_000)
    try:
        await staying.read_run("x")  # connects, creates the table
        queued = closing.append_nowait([event("closing", 1)], now=False)
        await asyncio.wait_for(closing.close(), 10)
        assert queued.done()
        assert queued.result() is True
        assert [e.seq for e in await staying.read_run("closing")] == [1]
        await staying.append_now([event("staying", 1)])
        assert [e.seq for e in await staying.read_run("staying")] == [1]
    finally:
        await closing.close()
        await staying.close()
    assert await database.until_no_connections() == 0


async def test_a_journal_joining_while_the_last_one_closes_connects_after_it(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The share being closed and the next one never hold connections at the same time."""
    opened_while_open: list[bool] = []
    old = PostgresRunJournal(database.dsn, max_connections=1)
    await old.append([event("old", 1)])
    old_share = old._share
    assert old_share is not None

    async def open_pool(*args: object, **kwargs: object) -> object:
        opened_while_open.append(not old_share._closed.is_set())
        return await real_open_pool(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(journal_postgres, "open_pool", open_pool)
    new = PostgresRunJournal(database.dsn, max_connections=1)
    try:
        closing = asyncio.create_task(old.close())
        await asyncio.sleep(0)  # the close is under way: the share is leaving
        await new.append([event("new", 1)])
        await closing
        assert new._share is not old_share
        assert opened_while_open == [False]
        assert {e.run_id for e in await new.read_from(0)} == {"old", "new"}
    finally:
        await old.close()
        await new.close()
    assert await database.until_no_connections() == 0


async def test_a_failed_connect_is_a_store_error_and_leaves_nothing_behind() -> None:
    dsn = "postgresql://postgres@127.0.0.1:1/nowhere"  # nothing listens on port 1
    first = PostgresRunJournal(dsn, connect_timeout=2)
    second = PostgresRunJournal(dsn, connect_timeout=2)
    try:
        with pytest.raises(StoreError, match="cannot connect"):
            await first.append([event("a", 1)])
        with pytest.raises(StoreError, match="cannot connect"):
            await second.read_run("a")
    finally:
        await first.close()
        await second.close()
    assert not [key for key in journal_postgres._SHARES if key[1] == dsn]


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[str]:
    """The DSN of a server that accepts connections and never answers: a connect hangs."""
    accepted: list[asyncio.StreamWriter] = []

    def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/silent"
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def cancelled_close(journal: PostgresRunJournal) -> None:
    """Close ``journal`` while its batch hangs connecting, cancel that, see it raise."""
    closing = asyncio.create_task(journal.close())
    await asyncio.sleep(0.2)
    assert not closing.done()
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert journal._share is None  # it left the share all the same


def shares_of(dsn: str) -> list[object]:
    return [key for key in journal_postgres._SHARES if key[1] == dsn]


async def test_a_cancelled_append_or_close_raises_and_the_last_close_frees_the_share() -> None:
    async with silent_server() as dsn:
        first = PostgresRunJournal(dsn, connect_timeout=60)
        last = PostgresRunJournal(dsn, connect_timeout=60)
        try:
            first_queued = first.append_nowait([event("a", 1)], now=True)  # its batch connects
            last_queued = last.append_nowait([event("b", 1)], now=True)
            append = asyncio.create_task(first.append([event("a", 2)]))
            await asyncio.sleep(0.2)
            append.cancel()
            with pytest.raises(asyncio.CancelledError):
                await append
            share = first._share
            assert share is not None
            assert share.users == 2
            # Not the last journal: its close waits for its own queued append; cancelled, it
            # raises and leaves, and the batch goes on for the other journal.
            await cancelled_close(first)
            assert share.users == 1
            assert not first_queued.done()
            # The last journal, cancelled while it waits for its own append: it cuts the
            # batches short and closes the share at once.
            await cancelled_close(last)
            assert not shares_of(dsn)
            assert first_queued.cancelled()
            assert last_queued.cancelled()
            with pytest.raises(JournalClosedError):
                await first.append([event("a", 3)])
        finally:
            await first.close()
            await last.close()


async def test_a_last_close_cancelled_while_it_drains_the_batches_frees_the_share() -> None:
    async with silent_server() as dsn:
        first = PostgresRunJournal(dsn, connect_timeout=60)
        last = PostgresRunJournal(dsn, connect_timeout=60)
        try:
            queued = first.append_nowait([event("a", 1)], now=True)  # its batch connects
            append = asyncio.create_task(last.append([event("b", 1)]))
            await asyncio.sleep(0.2)
            append.cancel()  # the last journal has no append of its own left to wait for
            with pytest.raises(asyncio.CancelledError):
                await append
            await cancelled_close(first)
            assert not queued.done()
            await cancelled_close(last)  # drains the batch of the journal closed before it
            assert not shares_of(dsn)
            assert queued.cancelled()
        finally:
            await first.close()
            await last.close()

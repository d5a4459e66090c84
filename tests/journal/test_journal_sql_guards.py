"""Guards of the database journals (``journal/sql.py``, ``sqlite.py``, ``postgres.py``) that no
other test holds (a mutation sweep): fence checks against an absent record, a stale fenced append
sharing a batch with a duplicate, a key twice in one batch, and PostgreSQL's share lifecycle.

PostgreSQL cases use ``fresh_stores``: skipped locally, failed under ``CI=true``, when the test
PostgreSQL is down.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest

from oma_actors.errors import LeaseError, StoreError
from oma_actors.journal import (
    JournalAppendError,
    JournalClosedError,
    JournalCorruptError,
    JournalDuplicateError,
    PostgresRunJournal,
    SqliteRunJournal,
)
from oma_actors.journal.marks import DispatchMark
from oma_actors.journal.sqlite import MARKS_TABLE
from oma_actors.keyspace import run_record_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores.base import Expect
from oma_actors.testing.journal_contract import event, events

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from service_kit import FreshStores

    from oma_actors.journal.sql import SqlRunJournal
    from oma_actors.stores.base import ConditionalStore, Write


class FixedFence:
    """An ``AppendFence`` whose record checks are given (a lease hands out its own)."""

    def __init__(self, *checks: Expect) -> None:
        self.checks = list(checks)

    @property
    def fence_store(self) -> ConditionalStore | None:
        return None

    async def fenced(self, apply: Callable[[list[Expect], list[Write]], Awaitable[bool]]) -> bool:
        return await apply(list(self.checks), [])


class Backend:
    """A store and journals in its database, closed after the test."""

    def __init__(
        self,
        store: ConditionalStore,
        make: Callable[[float], SqlRunJournal],
        rewrite_marks: Callable[[str], Awaitable[None]],
    ) -> None:
        self.store = store
        self._make = make
        self.rewrite_marks = rewrite_marks
        """Sets every stored mark row's payload (damage done behind the journal's back)."""
        self.journals: list[SqlRunJournal] = []

    def journal(self, flush_interval_ms: float = 0) -> SqlRunJournal:
        journal = self._make(flush_interval_ms)
        self.journals.append(journal)
        return journal


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, fresh_stores: FreshStores
) -> AsyncIterator[Backend]:
    """A store and a journal factory for its database."""
    made: Backend
    if request.param == "sqlite":
        path = tmp_path / "state.db"
        store: ConditionalStore = await fresh_stores.sqlite(path)

        async def rewrite_sqlite(payload: str) -> None:
            with sqlite3.connect(path) as connection:
                connection.execute(f"UPDATE {MARKS_TABLE} SET payload = ?", (payload,))

        made = Backend(
            store, lambda ms: SqliteRunJournal(path, flush_interval_ms=ms), rewrite_sqlite
        )
    else:
        dsn, table = fresh_stores.postgres_table()
        store = await fresh_stores.postgres(table)

        async def rewrite_postgres(payload: str) -> None:
            connection = await asyncpg.connect(dsn)
            try:
                await connection.execute(
                    f'UPDATE "{table}_journal_marks" SET payload = $1', payload
                )
            finally:
                await connection.close()

        made = Backend(
            store,
            lambda ms: PostgresRunJournal(dsn, store_table=table, flush_interval_ms=ms),
            rewrite_postgres,
        )
    try:
        yield made
    finally:
        for journal in made.journals:
            # Bounded: a close cut short still leaves the share (PostgreSQL aborts its batches).
            await asyncio.wait_for(journal.close(), 10)


def keys(found: list[Any]) -> list[tuple[str, int]]:
    return sorted((e.run_id, e.seq) for e in found)


async def test_a_fence_check_never_matches_an_absent_record(backend: Backend) -> None:
    """Holds the fence comparison's NULL handling (PostgreSQL's ``IS DISTINCT FROM``, SQLite's
    ``fence_holds``): a check of a value against an absent record, or of absence (``None``)
    against a present one, fails and nothing of the append lands; absence against absence holds.
    """
    journal = backend.journal()
    await backend.store.set("record", "v")
    await journal.append_fenced(events("run", [1]), FixedFence(Expect("record", "v")))
    for wrong in (Expect("gone", "v"), Expect("record", None)):
        with pytest.raises(JournalAppendError, match="refused"):
            await journal.append_fenced(events("run", [2]), FixedFence(wrong))
    assert keys(await journal.read_from(0)) == [("run", 1)]
    await journal.append_fenced(events("run", [2]), FixedFence(Expect("gone", None)))
    assert keys(await journal.read_from(0)) == [("run", 1), ("run", 2)]


async def test_an_append_under_a_deleted_run_record_lands_nothing(backend: Backend) -> None:
    """Holds the same NULL handling through a real lease: once the run record is deleted, the
    old holder's fenced append is refused and none of its events is stored."""
    journal = backend.journal()
    ledger = RunLedger(MemoryStoreRunStore(backend.store), owner="a", lease_ttl=1)
    handle = await ledger.acquire("run", heartbeat=False)
    await journal.append_fenced(events("run", [1]), handle)
    await backend.store.delete(run_record_key("run"))
    with pytest.raises((LeaseError, JournalAppendError)):
        await journal.append_fenced(events("run", [2]), handle)
    assert keys(await journal.read_from(0)) == [("run", 1)]


async def test_a_refused_fenced_append_sharing_a_batch_with_a_duplicate_lands_nothing(
    backend: Backend,
) -> None:
    """Holds the fence check of the retry after a duplicate (PostgreSQL ``_attempt``'s
    ``fence_holds``; SQLite's before its savepoints): a duplicate in the batch sends it down the
    slow path, where a stale fenced append must still be refused."""
    journal = backend.journal(flush_interval_ms=200)
    await journal.append(events("dup", [1]))
    before = journal.batches
    results = await asyncio.gather(
        journal.append(events("dup", [1])),
        journal.append(events("innocent", [1])),
        journal.append_fenced(events("stale", [1]), FixedFence(Expect("gone", "v"))),
        return_exceptions=True,
    )
    assert journal.batches - before == 1  # one batch: the case under test
    assert isinstance(results[0], JournalDuplicateError)
    assert results[1] is None
    assert isinstance(results[2], JournalAppendError)
    assert keys(await journal.read_from(0)) == [("dup", 1), ("innocent", 1)]


async def test_a_mark_row_naming_another_seq_is_an_error(backend: Backend) -> None:
    """Holds ``marks_of``'s ``mark.seq != seq``: a mark whose payload names another seq than its
    row's key is damage, never read as the mark of the key's seq (nor of the payload's)."""
    journal = backend.journal()
    await journal.append(events("r", [1, 2, 3]))
    await journal.mark(DispatchMark(run_id="r", seq=2, task_id="t", agent_name="x", call_id="c"))
    assert [(m.seq, m.call_id) for m in await journal.marks_of("r")] == [(2, "c")]
    await backend.rewrite_marks('{"runId":"r","seq":3,"taskId":"t","agentName":"x","callId":"c"}')
    with pytest.raises(JournalCorruptError, match="key"):
        await journal.marks_of("r")


async def test_a_mark_row_naming_another_call_is_an_error(backend: Backend) -> None:
    """Holds ``marks_of``'s ``mark.call_id != call_id``: a row keyed for one call whose payload
    names another is damage. Read as the other call's mark, two marks of one call would come
    back and the row's own call would have none (nothing then keeps it from running again)."""
    journal = backend.journal()
    await journal.append(events("r", [1, 2, 3]))
    await journal.mark(DispatchMark(run_id="r", seq=2, task_id="t", agent_name="x", call_id="c"))
    await backend.rewrite_marks('{"runId":"r","seq":2,"taskId":"t","agentName":"x","callId":"d"}')
    with pytest.raises(JournalCorruptError, match=r"call 'd' in the row of call 'c'"):
        await journal.marks_of("r")


@pytest.mark.timeout(30)
async def test_one_new_key_in_two_appends_of_one_batch_refuses_the_later(
    backend: Backend,
) -> None:
    """Holds ``commit_batch``'s ``key in seen``: a key in two appends of one batch refuses the
    later one before the transaction. (Without it PostgreSQL's retry finds both appends' key
    stored, blames neither, and retries forever.)"""
    journal = backend.journal(flush_interval_ms=200)
    before = journal.batches
    results = await asyncio.wait_for(
        asyncio.gather(
            journal.append([event("a", 1, text="first")]),
            journal.append([event("a", 1, text="second")]),
            return_exceptions=True,
        ),
        10,
    )
    assert journal.batches - before == 1
    assert results[0] is None
    assert isinstance(results[1], JournalDuplicateError)
    stored = await journal.read_from(0)
    assert [(e.run_id, e.seq, e.data.get("text")) for e in stored] == [("a", 1, "first")]


async def test_a_postgres_journal_refuses_another_event_loop(fresh_stores: FreshStores) -> None:
    """Holds ``PostgresRunJournal._database``'s loop check: a journal whose share (pool and
    batches) lives on one loop raises ``StoreError`` naming the cause on another."""
    dsn, table = fresh_stores.postgres_table()
    journal = PostgresRunJournal(dsn, store_table=table)
    try:
        await journal.append(events("run", [1]))

        async def elsewhere() -> None:
            with pytest.raises(StoreError, match="another event loop"):
                await journal.read_run("run")

        await asyncio.to_thread(asyncio.run, elsewhere())
        assert keys(await journal.read_run("run")) == [("run", 1)]
    finally:
        await journal.close()


async def test_a_read_under_way_when_the_journal_closes_is_refused(
    fresh_stores: FreshStores,
) -> None:
    """Holds ``_Database.connected``'s second ``_released`` check: a pool that finishes opening
    after the last journal left is closed at once and the read waiting on it is refused."""
    dsn, table = fresh_stores.postgres_table()
    journal = PostgresRunJournal(dsn, store_table=table)
    read = asyncio.create_task(journal.read_run("run"))
    for _ in range(100_000):  # until the read is opening the pool
        if journal._share is not None and journal._share._opening.locked():
            break
        await asyncio.sleep(0)
    else:
        pytest.fail("the read never started opening the pool")
    await journal.close()
    with pytest.raises(JournalClosedError):
        await read

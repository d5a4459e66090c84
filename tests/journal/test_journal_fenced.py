"""Fenced appends (D11, D15): a database journal carries the run lease's record check.

A leased run whose journal lives in the run record's database saves its per-turn boundaries by
fenced appends (journal-first); after a takeover or an operator cancel not one event of the old
owner lands. A journal that cannot carry the fence (another database, a JSONL file) leaves a
leased run on fenced snapshots.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest
from test_journal_durable import WORKLOADS, team

from oma_actors import CheckpointOptions, OpenMultiAgent, Task
from oma_actors.errors import LeaseError
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed, ProgressEvent
from oma_actors.journal import (
    JournalAppendError,
    JournalOptions,
    JsonlRunJournal,
    PostgresRunJournal,
    SqliteRunJournal,
    verify_run,
)
from oma_actors.keyspace import run_record_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import SqliteStore
from oma_actors.stores.postgres import lock_id
from oma_actors.testing import FakeClock
from oma_actors.testing.journal_contract import event, events

if TYPE_CHECKING:
    from service_kit import FreshStores

    from oma_actors.journal.sql import SqlRunJournal
    from oma_actors.stores.base import ConditionalStore

Pair = tuple["ConditionalStore", "SqlRunJournal"]


@pytest.fixture(params=["sqlite", "postgres"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path, fresh_stores: FreshStores) -> Any:
    """A store and the journal in its database."""
    journal: SqlRunJournal
    if request.param == "sqlite":
        store: ConditionalStore = await fresh_stores.sqlite(tmp_path / "state.db")
        journal = SqliteRunJournal(tmp_path / "state.db")
    else:
        dsn, table = fresh_stores.postgres_table()
        store = await fresh_stores.postgres(table)
        journal = PostgresRunJournal(dsn, store_table=table)
    try:
        yield store, journal
    finally:
        await journal.close()


def ledger(store: ConditionalStore, clock: FakeClock, owner: str) -> RunLedger:
    return RunLedger(MemoryStoreRunStore(store), owner=owner, lease_ttl=1, clock=clock.unix)


async def test_a_stale_owners_append_is_refused_and_nothing_of_it_lands(pair: Pair) -> None:
    store, journal = pair
    clock = FakeClock()
    old = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    await journal.append_fenced(events("run-1", [1, 2]), old)
    clock.advance(5)
    new = await ledger(store, clock, "b").acquire("run-1", heartbeat=False)  # takeover
    with pytest.raises(LeaseError) as caught:
        await journal.append_fenced(events("run-1", [3]), old)
    assert caught.value.code == "RUN_LEASE_LOST"
    assert [e.seq for e in await journal.read_run("run-1")] == [1, 2]
    await journal.append_fenced(events("run-1", [3]), new)
    assert [e.seq for e in await journal.read_run("run-1")] == [1, 2, 3]


async def test_a_refused_run_leaves_the_other_runs_of_its_batch_alone(pair: Pair) -> None:
    store, journal = pair
    clock = FakeClock()
    old = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    await ledger(store, clock, "op").cancel("run-1", "stop")  # fences the holder out
    results = await asyncio.gather(
        journal.append_fenced(events("run-1", [1]), old),
        journal.append(events("run-2", [1])),
        return_exceptions=True,
    )
    assert isinstance(results[0], LeaseError)
    assert results[1] is None
    assert [(e.run_id, e.seq) for e in await journal.read_from(0)] == [("run-2", 1)]


async def test_a_fenced_append_holds_one_runs_events(pair: Pair) -> None:
    store, journal = pair
    handle = await ledger(store, FakeClock(), "a").acquire("run-1", heartbeat=False)
    with pytest.raises(JournalAppendError, match="one run"):
        await journal.append_fenced([event("run-1", 1), event("run-2", 1)], handle)
    assert await journal.read_from(0) == []


async def test_the_journal_knows_which_store_shares_its_database(
    tmp_path: Path, fresh_stores: FreshStores
) -> None:
    journal = SqliteRunJournal(tmp_path / "state.db")
    assert journal.shares_database(await fresh_stores.sqlite(tmp_path / "state.db"))
    assert not journal.shares_database(await fresh_stores.sqlite(tmp_path / "other.db"))
    assert not journal.shares_database(None)
    dsn, table = fresh_stores.postgres_table()
    pg = PostgresRunJournal(dsn, store_table=table)
    assert pg.shares_database(await fresh_stores.postgres(table))
    assert not pg.shares_database(await fresh_stores.postgres())  # another table


async def test_a_takeover_in_flight_waits_for_the_batch_or_the_batch_for_it(
    fresh_stores: FreshStores,
) -> None:
    """The record check takes the store's lock: a takeover committing while the batch reads
    the record is seen by the batch, never missed (then the stale rows would land after it)."""
    dsn, table = fresh_stores.postgres_table()
    store = await fresh_stores.postgres(table)
    journal = PostgresRunJournal(dsn, store_table=table)
    old = await ledger(store, FakeClock(), "a").acquire("run-1", heartbeat=False)
    await journal.append_fenced(events("run-1", [1]), old)
    key = run_record_key("run-1")
    takeover = await asyncpg.connect(dsn)
    watcher = await asyncpg.connect(dsn)
    try:
        # A new owner's record write, as PostgresStore.apply makes it, not yet committed.
        transaction = takeover.transaction()
        await transaction.start()
        await takeover.execute("SELECT pg_advisory_xact_lock($1)", lock_id(table, key))
        await takeover.execute(f'UPDATE "{table}" SET value = value || $2 WHERE key = $1', key, " ")
        append = asyncio.create_task(journal.append_fenced(events("run-1", [2]), old))
        # Until the batch waits on the takeover's lock (or, without the lock, has finished).
        while not append.done():
            waiting = await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() "
                "AND (query LIKE '%pg_advisory_xact_lock%' OR query LIKE $1)",
                f'%FROM "{table}" WHERE key = ANY%',
            )
            if waiting:
                break
            await asyncio.sleep(0.01)
        await transaction.commit()
        with pytest.raises((LeaseError, JournalAppendError)):
            await append
    finally:
        await takeover.close()
        await watcher.close()
        await journal.close()
    reader = PostgresRunJournal(dsn, store_table=table)
    try:
        assert [e.seq for e in await reader.read_run("run-1")] == [1]
    finally:
        await reader.close()


# --- through the orchestrator -----------------------------------------------------------------


def modes(events: list[ProgressEvent]) -> set[str]:
    return {e.mode for e in events if isinstance(e, CheckpointSaved)}


async def run_leased(store: ConditionalStore, journal: Any, run_id: str) -> Any:
    progress: list[ProgressEvent] = []
    work = WORKLOADS["unsafe_tool"]
    result = await OpenMultiAgent(
        on_progress=progress.append, run_store=MemoryStoreRunStore(store)
    ).run_tasks(
        team(work.turns, work.calls, work.effect, []), [Task("t", "x", assignee="w", id="t0")],
        checkpoint=CheckpointOptions(store=store, run_id=run_id),
        journal=JournalOptions(journal, durable=True),
    )  # fmt: skip
    return result, progress


async def test_a_leased_run_on_its_databases_journal_is_journal_first(pair: Pair) -> None:
    store, journal = pair
    result, progress = await run_leased(store, journal, "leased")
    assert result.success
    assert modes(progress) == {"snapshot", "journal"}  # per-turn boundaries are fenced appends
    assert (await verify_run(journal)).ok
    stored = await store.get("__oma_checkpoint__/leased/latest")
    assert stored is not None
    assert '"journalRef":{"kind":"' + journal.kind + '","store":"same-database"' in stored.value


async def test_a_leased_run_on_another_databases_journal_keeps_fenced_snapshots(
    tmp_path: Path, fresh_stores: FreshStores
) -> None:
    store = await fresh_stores.sqlite(tmp_path / "state.db")
    journal = SqliteRunJournal(tmp_path / "journal.db")  # cannot see the run record
    try:
        result, progress = await run_leased(store, journal, "leased")
        recorded = await journal.read_run("leased")
    finally:
        await journal.close()
    assert result.success
    assert modes(progress) == {"snapshot"}
    assert not [e for e in progress if isinstance(e, CheckpointSaveFailed)]
    assert recorded[-1].type == "run/end"  # the journal extends the snapshots, unfenced


@pytest.mark.parametrize("durable", [True, False], ids=["journal-first", "oma-mode"])
async def test_after_an_operator_cancel_no_event_of_the_run_lands(
    tmp_path: Path, fresh_stores: FreshStores, durable: bool
) -> None:
    store: SqliteStore = await fresh_stores.sqlite(tmp_path / "state.db")
    journal = SqliteRunJournal(tmp_path / "state.db")
    reads: list[asyncio.Future[list[Any]]] = []
    work = WORKLOADS["one_call_per_turn"]
    effects: list[str] = []
    the_team = team(work.turns, work.calls, work.effect, effects)
    note = the_team.agents[0].tools[0]
    inner = note.execute

    async def cancelling(args: Any, ctx: Any) -> Any:
        if ctx.tool_call_id == "c3-0":  # mid-run: an operator cancels, the holder is fenced
            await RunLedger(MemoryStoreRunStore(store), owner="op").cancel("cut", "stop")
            # Read at once, in a task of its own: the run, fenced out, may cancel this tool
            # call before an awaited read here would return.
            reads.append(asyncio.ensure_future(journal.read_run("cut")))
        return await inner(args, ctx)

    object.__setattr__(note, "execute", cancelling)
    progress: list[ProgressEvent] = []
    try:
        result = await OpenMultiAgent(
            on_progress=progress.append, run_store=MemoryStoreRunStore(store)
        ).run_tasks(
            the_team, [Task("t", "x", assignee="w", id="t0")],
            checkpoint=CheckpointOptions(store=store, run_id="cut"),
            journal=JournalOptions(journal, durable=durable),
        )  # fmt: skip
        cancelled_at = [max(e.seq for e in await read) for read in reads]
        stored = await journal.read_run("cut")
    finally:
        await journal.close()
    assert result.status.code == "aborted"
    assert ("journal" in modes(progress)) is durable
    assert cancelled_at
    assert max(e.seq for e in stored) == cancelled_at[0]  # not one event after the cancel
    # The refused append is a loss of the lease (Fenced), not an unknown outcome: the runner
    # takes not one more step (no further model call, no further tool).
    assert effects[-1] == "c3-0"
    # and the writer says so: its failed save is the lease's loss, not an unknown append.
    failed = [e.error for e in progress if isinstance(e, CheckpointSaveFailed)]
    assert failed
    assert all(error.startswith("RUN_LEASE_LOST") for error in failed), failed


class _Fence:
    """A fence that hands the append its own checks and writes, and answers as the lease would."""

    def __init__(self, store: ConditionalStore, checks: list[Any], writes: list[Any]) -> None:
        self.fence_store = store
        self._checks, self._writes = checks, writes

    async def fenced(self, apply: Any) -> bool:
        return bool(await apply(self._checks, self._writes))


async def test_a_fenced_append_moves_no_store_key(pair: Pair) -> None:
    from oma_actors.stores.base import Put

    store, journal = pair
    fence = _Fence(store, [], [Put("__oma_run__/run-1", "{}")])
    with pytest.raises(JournalAppendError, match="writes no store keys"):
        await journal.append_fenced(events("run-1", [1]), fence)
    assert await journal.read_from(0) == []
    assert await store.get("__oma_run__/run-1") is None


async def test_a_refused_check_with_the_lease_still_held_is_an_error_not_a_success(
    pair: Pair,
) -> None:
    from oma_actors.stores.base import Expect

    store, journal = pair
    await store.set("__oma_run__/run-1", "mine")
    fence = _Fence(store, [Expect("__oma_run__/run-1", "someone else's")], [])
    with pytest.raises(JournalAppendError, match="refused although the lease is held"):
        await journal.append_fenced(events("run-1", [1]), fence)
    assert await journal.read_from(0) == []
    held = _Fence(store, [Expect("__oma_run__/run-1", "mine")], [])
    await journal.append_fenced(events("run-1", [1]), held)
    assert [e.seq for e in await journal.read_from(0)] == [1]


async def test_a_leased_runs_unfenced_jsonl_journal_takes_no_event_after_a_cancel(
    tmp_path: Path, fresh_stores: FreshStores
) -> None:
    """A JSONL file cannot carry the fence (D11), so the run keeps fenced snapshots; its journal
    appends are still checked against the run record first: after an operator's cancel (a
    takeover alike) not one event of the old holder lands, its ``run/end`` included."""
    store: SqliteStore = await fresh_stores.sqlite(tmp_path / "state.db")
    path = tmp_path / "run.jsonl"
    journal = JsonlRunJournal(path)
    work = WORKLOADS["one_call_per_turn"]
    effects: list[str] = []
    the_team = team(work.turns, work.calls, work.effect, effects)
    note = the_team.agents[0].tools[0]
    inner = note.execute
    seen: list[int] = []

    async def cancelling(args: Any, ctx: Any) -> Any:
        if ctx.tool_call_id == "c3-0":  # mid-run: an operator cancels, the holder is fenced
            await asyncio.sleep(0.2)  # what was appended before lands (best effort, unfenced)
            await RunLedger(MemoryStoreRunStore(store), owner="op").cancel("cut", "stop")
            seen.append(len(path.read_text().splitlines()))
        return await inner(args, ctx)

    object.__setattr__(note, "execute", cancelling)
    try:
        result = await OpenMultiAgent(run_store=MemoryStoreRunStore(store)).run_tasks(
            the_team, [Task("t", "x", assignee="w", id="t0")],
            checkpoint=CheckpointOptions(store=store, run_id="cut"),
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
    finally:
        await journal.close()
    assert result.status.code == "aborted"
    assert seen
    assert len(path.read_text().splitlines()) == seen[0]  # not one line after the cancel

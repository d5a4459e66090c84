"""The run journal contract (``RunJournal``, D15) as plain async checks any backend can run.

No pytest dependency: each check raises ``AssertionError`` naming the rule it broke.
``make_journal`` is a zero-argument factory, sync or async, returning a fresh, EMPTY journal;
every check gets its own and closes it. What only some backends can show is opted into with
``JournalHooks``::

    await check_run_journal(InMemoryRunJournal)
    await check_run_journal(
        lambda: SqliteRunJournal(tmp_path / f"{uuid4()}.db"),
        JournalHooks(keyed=True, reopen=..., commits=lambda j: j.batches, ...),
    )

The rules: events come back in append order and ``read_from`` / ``read_run`` filter by seq and
run, and ``read_run_range`` by run, both seq bounds and type (by the journal's own
``read_range`` where it has one); a closed journal refuses appends and loses none it accepted; a
keyed journal refuses a duplicate ``(run_id, seq)`` for that append alone; concurrent appends
of many runs share commits (counted by ``commits``, never timed); a failed commit makes every
append of its batch raise and leaves none of it visible; a stored event that does not parse is
a typed error; a journal keeping dispatch marks (``journal.marks``, issue 18) keeps them beside
its events, durable across a reopen, filtered by run and seq, several calls at one seq
included.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from oma_actors.errors import StoreError
from oma_actors.journal.base import read_run, read_run_range
from oma_actors.journal.errors import (
    JournalClosedError,
    JournalCorruptError,
    JournalDuplicateError,
)
from oma_actors.journal.event import JournalEvent
from oma_actors.journal.marks import DispatchMark, marks_of_journal
from oma_actors.testing._contract import check_name, expect

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from oma_actors.journal.base import RunJournal

MakeJournal: TypeAlias = "Callable[[], RunJournal | Awaitable[RunJournal]]"
Hook: TypeAlias = "Callable[[RunJournal], Awaitable[None]]"

RUNS = 40
"""How many runs append at once in the group-commit check."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalHooks:
    """What a backend lets the contract see or break; ``None`` skips the checks that need it.

    Attributes:
        keyed: the journal refuses a duplicate ``(run_id, seq)`` (the database journals).
        reopen: returns a NEW journal over the same durable state (reads after a close).
        commits: how many commits (transactions, fsyncs) the journal made so far.
        break_next_commit: makes the journal's next commit fail (raise), once.
        corrupt: replaces the stored event ``(run_id, seq)`` with bytes that do not parse.
    """

    keyed: bool = False
    reopen: Callable[[RunJournal], RunJournal | Awaitable[RunJournal]] | None = None
    commits: Callable[[RunJournal], int | Awaitable[int]] | None = None
    break_next_commit: Hook | None = None
    corrupt: Callable[[RunJournal, str, int], Awaitable[None]] | None = None


def event(run_id: str, seq: int, **data: Any) -> JournalEvent:
    """A ``turn/start`` event of ``run_id`` at ``seq`` (the contract's test event)."""
    return JournalEvent(
        seq=seq,
        type="turn/start",
        run_id=run_id,
        attempt=1,
        timestamp_unix_ms=1_700_000_000_000 + seq,
        data={"turn": seq, **data},
    )


def events(run_id: str, seqs: Sequence[int]) -> list[JournalEvent]:
    """``event(run_id, seq)`` for each seq."""
    return [event(run_id, seq) for seq in seqs]


async def check_run_journal(make_journal: MakeJournal, hooks: JournalHooks | None = None) -> None:
    """Run every check of the contract that ``hooks`` allows, each on a fresh journal.

    Raises:
        AssertionError: the journal breaks the contract; the message names the failing check.
    """
    hooks = hooks or JournalHooks()
    checks: list[Callable[[RunJournal, JournalHooks], Awaitable[None]]] = [
        _order_and_read_from,
        _read_run_filters_by_run_and_seq,
        _read_run_range_bounds_seqs_and_types,
        _close_refuses_appends_and_keeps_accepted_ones,
    ]
    if hooks.keyed:
        checks.append(_duplicate_is_refused_for_that_append_alone)
    if hooks.commits is not None:
        checks.append(_concurrent_runs_share_commits)
    if hooks.break_next_commit is not None:
        checks.append(_failed_commit_shows_nothing_of_its_batch)
    if hooks.corrupt is not None:
        checks.append(_unparseable_event_is_a_typed_error)
    checks.append(_dispatch_marks_are_kept_beside_the_events)
    for check in checks:
        journal = await _made(make_journal())
        try:
            expect(not await journal.read_from(0), "make_journal() must return an empty journal")
            await check(journal, hooks)
        except AssertionError as exc:
            raise AssertionError(f"run journal: {check_name(check)}: {exc}") from exc
        finally:
            await journal.close()


async def _made(value: RunJournal | Awaitable[RunJournal]) -> RunJournal:
    return await value if inspect.isawaitable(value) else value


def _keys(found: Sequence[JournalEvent]) -> list[tuple[str, int]]:
    return [(e.run_id, e.seq) for e in found]


async def _readback(journal: RunJournal, hooks: JournalHooks) -> RunJournal:
    return journal if hooks.reopen is None else await _made(hooks.reopen(journal))


async def _order_and_read_from(journal: RunJournal, hooks: JournalHooks) -> None:
    await journal.append(events("a", [1, 2]))
    await journal.append(events("a", [3, 4, 5]))
    stored = await journal.read_from(0)
    expect(_keys(stored) == [("a", s) for s in range(1, 6)], f"read_from(0) gave {_keys(stored)}")
    expect(stored[2] == event("a", 3), "an event read back differs from the one appended")
    tail = await journal.read_from(4)
    expect(_keys(tail) == [("a", 4), ("a", 5)], f"read_from(4) gave {_keys(tail)}")


async def _read_run_filters_by_run_and_seq(journal: RunJournal, hooks: JournalHooks) -> None:
    await journal.append(events("a", [1, 2, 3]))
    await journal.append(events("b", [1, 2]))
    await journal.append(events("a", [4]))
    mine = await read_run(journal, "a", 2)
    expect(_keys(mine) == [("a", 2), ("a", 3), ("a", 4)], f"read_run('a', 2) gave {_keys(mine)}")
    every = await journal.read_from(2)
    expect(
        sorted(_keys(every)) == [("a", 2), ("a", 3), ("a", 4), ("b", 2)],
        f"read_from(2) must return every run's events, gave {_keys(every)}",
    )
    for run_id in ("a", "b"):
        seqs = [e.seq for e in every if e.run_id == run_id]
        expect(seqs == sorted(seqs), f"run {run_id}'s events out of order: {seqs}")


async def _read_run_range_bounds_seqs_and_types(journal: RunJournal, hooks: JournalHooks) -> None:
    kinds = ("turn/start", "turn/end", "tool/call")

    def typed(run_id: str, seq: int) -> JournalEvent:
        kind = kinds[seq % len(kinds)]
        return JournalEvent(
            seq=seq, type=kind, run_id=run_id, attempt=1, timestamp_unix_ms=seq, data={"n": seq}
        )

    await journal.append([typed("a", seq) for seq in range(1, 8)])
    await journal.append([typed("b", seq) for seq in range(1, 8)])
    reader = await _readback(journal, hooks)
    bounded = await read_run_range(reader, "a", 2, 5)
    expect(_keys(bounded) == [("a", s) for s in range(2, 6)], f"2..5 gave {_keys(bounded)}")
    expect(bounded[0] == typed("a", 2), "an event read back differs from the one appended")
    open_ended = await read_run_range(reader, "a", 6)
    expect(_keys(open_ended) == [("a", 6), ("a", 7)], f"6.. gave {_keys(open_ended)}")
    wanted = {"turn/end", "tool/call"}
    of_types = await read_run_range(reader, "b", 1, 6, types=wanted)
    keys = _keys(of_types)
    expect(
        keys == [("b", s) for s in (1, 2, 4, 5)] and {e.type for e in of_types} == wanted,
        f"types {sorted(wanted)} of b 1..6 gave {[(e.seq, e.type) for e in of_types]}",
    )
    if reader is not journal:
        await reader.close()


async def _close_refuses_appends_and_keeps_accepted_ones(
    journal: RunJournal, hooks: JournalHooks
) -> None:
    await journal.append(events("a", [1]))
    pending = asyncio.create_task(journal.append(events("a", [2])))
    await asyncio.sleep(0)  # the append is accepted (in an open batch) before the close
    await journal.close()
    try:
        await pending  # an append accepted before close() completes, it is not dropped
    except Exception as exc:
        raise AssertionError(f"an append accepted before close() raised {exc!r}") from exc
    try:
        await journal.append(events("a", [3]))
    except JournalClosedError:
        pass
    else:
        raise AssertionError("an append after close() did not raise JournalClosedError")
    reader = await _readback(journal, hooks)
    try:
        stored = _keys(await reader.read_from(0))
    finally:
        if reader is not journal:
            await reader.close()
    expect(stored == [("a", 1), ("a", 2)], f"after close the journal holds {stored}")


def _mark(run_id: str, seq: int, call_id: str) -> DispatchMark:
    return DispatchMark(run_id=run_id, seq=seq, task_id="t", agent_name="w", call_id=call_id)


async def _dispatch_marks_are_kept_beside_the_events(
    journal: RunJournal, hooks: JournalHooks
) -> None:
    keeper = marks_of_journal(journal)
    if keeper is None:
        return  # a journal without marks: its cut tail stays undetectable (not a breach)
    await journal.append(events("a", [1, 2, 3]))
    for mark in (_mark("a", 2, "c1"), _mark("a", 2, "c2"), _mark("b", 1, "x"), _mark("a", 3, "c3")):
        await keeper.mark(mark)
    expect(
        _keys(await journal.read_from(0)) == [("a", 1), ("a", 2), ("a", 3)],
        "dispatch marks must not show up among the events",
    )
    reader = await _readback(journal, hooks)
    try:
        found = marks_of_journal(reader)
        expect(found is not None, "a reopened journal lost its dispatch marks")
        assert found is not None
        every = [(m.seq, m.call_id) for m in await found.marks_of("a")]
        expect(
            sorted(every) == [(2, "c1"), (2, "c2"), (3, "c3")] and every[-1] == (3, "c3"),
            f"marks_of('a') gave {every}",
        )
        above = [(m.seq, m.call_id) for m in await found.marks_of("a", 2)]
        expect(above == [(3, "c3")], f"marks_of('a', 2) gave {above}")
        other = [m.call_id for m in await found.marks_of("b")]
        expect(other == ["x"], f"marks_of('b') gave {other}")
    finally:
        if reader is not journal:
            await reader.close()


async def _duplicate_is_refused_for_that_append_alone(
    journal: RunJournal, hooks: JournalHooks
) -> None:
    await journal.append(events("a", [1, 2, 3]))
    original = await journal.read_from(3)
    results = await asyncio.gather(
        # 3 is stored already; 4 is new and comes first: the append must leave no trace at all
        journal.append([event("a", 4), event("a", 3, changed=True)]),
        journal.append(events("b", [1])),  # same batch, innocent
        journal.append(events("c", [1, 1])),  # repeated within one append
        return_exceptions=True,
    )
    expect(isinstance(results[0], JournalDuplicateError), f"a stored seq gave {results[0]!r}")
    expect(results[1] is None, f"an innocent append of the same batch gave {results[1]!r}")
    expect(isinstance(results[2], JournalDuplicateError), f"a repeated seq gave {results[2]!r}")
    error = results[0]
    assert isinstance(error, JournalDuplicateError)
    expect((error.run_id, error.seq) == ("a", 3), f"the error names {error.run_id}/{error.seq}")
    stored = await journal.read_from(0)
    expect(
        sorted(_keys(stored)) == [("a", 1), ("a", 2), ("a", 3), ("b", 1)],
        f"a refused append left {_keys(stored)}",
    )
    expect(await journal.read_from(3) == original, "a duplicate overwrote the stored event")


async def _concurrent_runs_share_commits(journal: RunJournal, hooks: JournalHooks) -> None:
    assert hooks.commits is not None
    await journal.append(events("warm-up", [1]))  # opens the backend outside the count
    before = await _count(hooks.commits(journal))
    await asyncio.gather(*(journal.append(events(f"run-{i}", [1, 2])) for i in range(RUNS)))
    made_commits = await _count(hooks.commits(journal)) - before
    expect(
        1 <= made_commits <= 2,
        f"{RUNS} concurrent appends took {made_commits} commits (group commit shares them)",
    )
    stored = await journal.read_from(0)
    expect(len(stored) == 1 + 2 * RUNS, f"{len(stored)} events stored of {1 + 2 * RUNS}")


async def _count(value: int | Awaitable[int]) -> int:
    return await value if inspect.isawaitable(value) else value


async def _failed_commit_shows_nothing_of_its_batch(
    journal: RunJournal, hooks: JournalHooks
) -> None:
    assert hooks.break_next_commit is not None
    await journal.append(events("a", [1]))
    await hooks.break_next_commit(journal)
    results = await asyncio.gather(
        journal.append(events("a", [2, 3])),
        journal.append(events("b", [1])),
        return_exceptions=True,
    )
    for result in results:
        expect(isinstance(result, StoreError), f"an append of a failed commit gave {result!r}")
    stored = _keys(await journal.read_from(0))
    expect(stored == [("a", 1)], f"a failed commit left {stored} visible")
    await journal.append(events("a", [2]))  # the journal recovers
    stored = _keys(await journal.read_from(0))
    expect(stored == [("a", 1), ("a", 2)], f"after a failed commit the journal holds {stored}")


async def _unparseable_event_is_a_typed_error(journal: RunJournal, hooks: JournalHooks) -> None:
    assert hooks.corrupt is not None
    await journal.append(events("a", [1, 2, 3]))
    await hooks.corrupt(journal, "a", 2)
    reads: list[tuple[str, Awaitable[list[JournalEvent]]]] = [
        ("read_from(0)", journal.read_from(0)),
        ("read_run('a', 1)", read_run(journal, "a", 1)),
    ]
    for name, read in reads:
        try:
            await read
        except JournalCorruptError:
            continue
        raise AssertionError(f"{name} of a journal with a garbage event did not raise")


__all__ = ["RUNS", "JournalHooks", "check_run_journal", "event", "events"]

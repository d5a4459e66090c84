"""``JournalPath``: when a journal append is the save (decision D10), and when to compact."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fold_support import (
    CALL,
    assistant_tool_turn,
    entry,
    executing,
    journaled,
    tool_call,
    tool_result,
    with_entries,
)

from oma_actors.checkpoint import CheckpointSnapshot, journal_path
from oma_actors.checkpoint.journal_path import JOURNAL_BOUNDARIES, JournalPath, difference
from oma_actors.domain.inflight import PendingCall
from oma_actors.domain.messages import Message, TokenUsage
from oma_actors.journal.event import JournalEvent


class FakeTail:
    """Hands out the events it is given; fails ``durable_through`` when told to."""

    def __init__(self) -> None:
        self.events: list[JournalEvent] = []
        self.fail = False
        self.covered = 0
        self.released = 0
        self.waited: list[int] = []

    def take_through(self, seq: int) -> list[JournalEvent]:
        taken = [e for e in self.events if e.seq <= seq]
        self.events = [e for e in self.events if e.seq > seq]
        return taken

    async def durable_through(self, seq: int) -> None:
        self.waited.append(seq)
        if self.fail:
            raise OSError("disk full")

    def cover(self, seq: int) -> None:
        self.covered = seq

    def release(self, seq: int) -> None:
        self.released = seq


def at(snapshot: CheckpointSnapshot, watermark: int) -> CheckpointSnapshot:
    return replace(snapshot, journal_watermark_seq=watermark)


def started(tail: FakeTail, unsafe: frozenset[str] = frozenset()) -> JournalPath:
    """A path whose view is the snapshot at watermark 100 with ``b`` awaiting the model."""
    path = JournalPath(tail, unsafe={"worker": unsafe})
    path.compacted(journaled(entry(mark=100)), size=10_000)
    return path


def after_answer(**changes: object) -> CheckpointSnapshot:
    """The run after event 101 (the tool turn for tu-1, usage 2/3) with b's mark at 101."""
    item = executing(turns=2, token_usage=TokenUsage(3, 4))
    item = replace(item, journal_seq=101)
    if changes:
        item = replace(item, state=replace(item.state, **changes))
    return at(with_entries(journaled(), item), 101)


async def test_a_boundary_whose_events_fold_to_its_state_is_saved_by_the_journal() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    snapshot = after_answer()
    view = path.fold(snapshot, "assistant_tool_turn")
    assert view is not None, path.divergence
    await path.commit(view, 101)
    assert tail.waited == [101]  # saved only once its events are durable


def test_a_state_the_fold_would_not_rebuild_compacts_and_says_why() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    # The run's state carries a loop warning the journal does not: a restore would lose it.
    assert path.fold(after_answer(loop_warned=True), "assistant_tool_turn") is None
    assert path.divergence == "in_flight[b].state.loop_warned differs"


@pytest.mark.parametrize("boundary", ["admission", "task_completed", "terminal", "suspended"])
def test_every_other_boundary_compacts(boundary: str) -> None:
    assert boundary not in JOURNAL_BOUNDARIES
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    assert path.fold(after_answer(), boundary) is None
    assert tail.events == []  # the events were taken all the same: nothing piles up


def test_the_first_boundary_compacts_there_is_no_view_yet() -> None:
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    tail.events = [assistant_tool_turn(101)]
    assert path.fold(after_answer(), "assistant_tool_turn") is None


def test_a_tail_that_outgrows_the_snapshot_compacts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    path.compacted(journaled(entry(mark=100)), size=50)  # a tiny snapshot
    tail.events = [assistant_tool_turn(101)]
    assert path.fold(after_answer(), "assistant_tool_turn") is None
    assert path.divergence is not None
    assert "outgrew" in path.divergence


def test_a_small_snapshot_lets_its_tail_grow_to_the_minimum_first() -> None:
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    path.compacted(journaled(entry(mark=100)), size=50)
    tail.events = [assistant_tool_turn(101)]
    assert path.fold(after_answer(), "assistant_tool_turn") is not None, path.divergence


async def test_after_a_failed_append_the_next_boundary_compacts() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    view = path.fold(after_answer(), "assistant_tool_turn")
    assert view is not None
    tail.fail = True
    with pytest.raises(OSError, match="disk full"):
        await path.commit(view, 101)
    tail.events = [tool_call(102, sources=[101])]
    assert path.fold(after_answer(), "tool_dispatch") is None


def test_a_failed_snapshot_write_makes_the_next_boundary_compact() -> None:
    tail = FakeTail()
    path = started(tail)
    path.lost()
    tail.events = [assistant_tool_turn(101)]
    assert path.fold(after_answer(), "assistant_tool_turn") is None


def test_a_compaction_covers_the_journal_through_its_watermark() -> None:
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    path.compacted(at(journaled(entry(mark=100)), 140), size=1)
    assert tail.covered == 140
    assert tail.released == 140  # the boundary's events go to the journal only now


def test_an_unsafe_call_started_in_the_tail_must_be_dispatched_in_the_state() -> None:
    # The restore marks it dispatched (D1); a state that does not say so would not match.
    tail = FakeTail()
    path = started(tail, unsafe=frozenset({"lookup"}))
    tail.events = [assistant_tool_turn(101)]
    view = path.fold(after_answer(), "assistant_tool_turn")
    assert view is not None
    path._view = view  # as commit() would, without waiting
    dispatched = (PendingCall(call=CALL, dispatched=True),)
    tail.events = [tool_call(102, sources=[101])]
    not_marked = replace(after_answer(), journal_watermark_seq=102)
    not_marked = with_seq(not_marked, 102)
    assert path.fold(not_marked, "tool_dispatch") is None
    assert path.divergence == "in_flight[b].state.pending differs"

    path._view = view
    tail.events = [tool_call(102, sources=[101])]
    marked = with_seq(replace(after_answer(pending=dispatched), journal_watermark_seq=102), 102)
    assert path.fold(marked, "tool_dispatch") is not None, path.divergence


def test_a_committed_result_folds_into_the_commit() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    view = path.fold(after_answer(), "assistant_tool_turn")
    assert view is not None
    path._view = view
    tail.events = [tool_call(102, sources=[101]), tool_result(103, sources=[102])]
    committed = executing(committed=True, turns=2, token_usage=TokenUsage(3, 4))
    snapshot = at(with_entries(journaled(), replace(committed, journal_seq=103)), 103)
    assert path.fold(snapshot, "tool_commit") is not None, path.divergence


def test_difference_names_the_first_field_that_differs() -> None:
    a = journaled(entry(mark=100))
    assert difference(a, a) is None
    assert difference(a, replace(a, goal="other")) == "goal differs"
    assert difference(a, replace(a, revision=9, created_at="x")) is None  # per-save stamps
    b = with_entries(a, entry(mark=100, conversation=(Message("user", []),)))
    assert difference(a, b) == "in_flight[b].state.conversation differs"


def with_seq(snapshot: CheckpointSnapshot, seq: int) -> CheckpointSnapshot:
    return replace(
        snapshot, in_flight=tuple(replace(e, journal_seq=seq) for e in snapshot.in_flight)
    )

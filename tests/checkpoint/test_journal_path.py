"""``JournalPath``: when a journal append is the save (decision D10), and when to compact."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fold_support import (
    assistant_tool_turn,
    entry,
    event,
    executing,
    journaled,
    text_answer,
    tool_call,
    tool_result,
    with_entries,
)

from oma_actors.checkpoint import CheckpointSnapshot, journal_path
from oma_actors.checkpoint.journal_path import JOURNAL_BOUNDARIES, JournalPath
from oma_actors.domain.messages import Message, TextBlock, TokenUsage
from oma_actors.domain.snapshot import RunIdentity
from oma_actors.journal.event import JournalEvent


class FakeTail:
    """Hands out the events it is given; fails ``durable_through`` when told to."""

    def __init__(self) -> None:
        self.events: list[JournalEvent] = []
        self.fail = False
        self.covered = 0
        self.released = 0
        self.waited: list[int] = []
        self.marked: str | None = None  # a fact recorded that no event carries

    def take_uncarried(self) -> str | None:
        reason, self.marked = self.marked, None
        return reason

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


def after_answer() -> CheckpointSnapshot:
    """The run after event 101 (the tool turn for tu-1, usage 2/3) with b's mark at 101."""
    item = executing(turns=2, token_usage=TokenUsage(3, 4))
    item = replace(item, journal_seq=101)
    return at(with_entries(journaled(), item), 101)


async def test_a_boundary_whose_events_fold_to_its_state_is_saved_by_the_journal() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    snapshot = after_answer()
    view = path.fold(snapshot, "assistant_tool_turn")
    assert view is not None, path.divergence
    await path.commit(101)
    assert tail.waited == [101]  # saved only once its events are durable


def test_a_fact_marked_uncarried_compacts_once_and_says_which() -> None:
    # D14: a consumed approval, an exceeded budget ...: no event carries them, the recorder
    # marks them where they happen, and the next save compacts.
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    tail.marked = "call 'tu-1' used up its approval"
    assert path.fold(after_answer(), "assistant_tool_turn") is None
    assert path.divergence == "call 'tu-1' used up its approval"
    path.compacted(after_answer(), size=10_000)
    tail.events = [tool_call(102, sources=[101])]
    assert path.fold(at(after_answer(), 102), "tool_dispatch") is not None  # taken once


def test_a_mark_is_taken_by_every_save_even_one_that_compacts_anyway() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.marked = "task 'c' was assigned to 'worker'"
    assert path.fold(after_answer(), "task_completed") is None
    assert tail.marked is None  # the compaction holds the change: the next save need not


UNCARRIED = {
    "memory": event(102, "memory/set", key="k", valueBytes=1),
    "failed": event(102, "task/status", task="c", taskId="c", status="failed"),
    "skipped": event(102, "task/status", task="c", taskId="c", status="skipped"),
    "unstamped start": event(102, "task/status", task="c", taskId="c", status="in_progress"),
    "decision": event(102, "approval/decision", task=None, agent=None, decision={}),
    "plan": event(102, "plan/set", task=None, agent=None, revision=2, source="revision"),
    "budget": event(102, "turn/end", turn=2, outcome="budget_exceeded"),
    "loop": event(102, "turn/end", turn=2, outcome="loop_detected"),
}


@pytest.mark.parametrize("name", sorted(UNCARRIED))
def test_an_event_the_fold_does_not_carry_compacts(name: str) -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101), UNCARRIED[name]]
    assert path.fold(at(after_answer(), 102), "assistant_tool_turn") is None
    assert path.divergence is not None


CARRIED = {
    "start": event(
        102,
        "task/status",
        task="c",
        taskId="c",
        status="in_progress",
        updatedAt="2026-01-01T00:00:00.000Z",
    ),
    "announced": event(102, "task/status", task="c", taskId="c", status="completed"),
    "request": event(102, "approval/request", request={}),  # its save compacted before it
    "tool_use": event(102, "turn/end", turn=1, outcome="tool_use"),
    "suspended": event(102, "turn/end", turn=2, outcome="suspended"),
}


@pytest.mark.parametrize("name", sorted(CARRIED))
def test_an_event_the_fold_carries_is_saved_by_the_journal(name: str) -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101), CARRIED[name]]
    assert path.fold(at(after_answer(), 102), "assistant_tool_turn") is not None, path.divergence


def test_a_task_start_is_carried_by_the_journal() -> None:
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    view = journaled(entry(mark=100))
    view = replace(
        view, tasks=tuple(replace(t, status="pending") if t.id == "c" else t for t in view.tasks)
    )
    path.compacted(view, size=10_000)
    tail.events = [assistant_tool_turn(101)]
    assert path.fold(after_answer(), "assistant_tool_turn") is not None, path.divergence


def test_a_new_conversation_is_journal_only_at_its_first_boundary() -> None:
    # Issue 19: the fold opens a new task's entry from its start and prompt, and a restore
    # fails closed a task whose dispatched call a damaged tail took (``checkpoint.stranded``).
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    fresh = entry(task_id="c", mark=101)
    snapshot = replace(after_answer(), in_flight=(*after_answer().in_flight, fresh))
    assert path.fold(snapshot, "assistant_tool_turn") is snapshot, path.divergence


NEXT = RunIdentity(run_id="run-test", attempt=2, trace_id="ab" * 16, root_span_id="cd" * 8)


def test_a_restored_attempts_admission_is_an_append_from_the_seeded_view() -> None:
    # Issue 19 step 4: the restore's state plus its run/start (the new identity) is the view.
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    restored = replace(journaled(entry(mark=100)), message_bus=None)
    path.seed(restored, NEXT)
    tail.events = [event(101, "run/start", task=None, agent=None, mode="restore")]
    admission = at(replace(restored, attempt=2, identity=NEXT), 101)
    assert path.fold(admission, "admission") is not None, path.divergence


def test_a_restore_seeded_with_the_bus_the_codec_writes_back_appends_its_admission() -> None:
    # The run's snapshots hold no message bus: the codec writes its source's (or an empty one).
    # Nothing of the restored state is compared with the admission's (issue 19: none is kept).
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    restored = journaled(entry(mark=100))
    empty = {"version": 1, "messages": [], "readState": []}
    path.seed(replace(restored, message_bus=empty), NEXT)
    admission = at(replace(restored, attempt=2, identity=NEXT, message_bus=None), 101)
    assert path.fold(admission, "admission") is not None, path.divergence


def test_a_fresh_runs_admission_compacts_there_is_no_view_yet() -> None:
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    assert "admission" in JOURNAL_BOUNDARIES
    assert path.fold(after_answer(), "admission") is None


@pytest.mark.parametrize("boundary", ["task_completed", "suspended"])
def test_every_other_boundary_compacts(boundary: str) -> None:
    assert boundary not in JOURNAL_BOUNDARIES
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    assert path.fold(after_answer(), boundary) is None
    assert tail.events == []  # the events were taken all the same: nothing piles up


def final_answer(**changes: object) -> CheckpointSnapshot:
    """The run after b's final answer (event 101) and its ``turn/end`` completed (102)."""
    answer = Message("assistant", [TextBlock("done")])
    state = entry(mark=102).state
    state = replace(
        state,
        conversation=(*state.conversation, answer),
        messages=(*state.messages, answer),
        turns=2,
        phase="completed",
        final_output="done",
        success=True,
    )
    item = replace(entry(mark=102), state=replace(state, **changes))
    return at(with_entries(journaled(), item), 102)


def test_a_final_answer_is_saved_by_the_journal() -> None:
    # D14: turn/end completed carries the terminal state; no snapshot, so no anchor (D17).
    tail = FakeTail()
    path = started(tail)
    tail.events = [text_answer(101), event(102, "turn/end", turn=2, outcome="completed")]
    assert path.fold(final_answer(), "terminal") is not None, path.divergence


def test_a_completion_other_than_a_final_answer_compacts() -> None:
    # The answer went over the budget: OMA's turn/end says budget_exceeded, not completed.
    tail = FakeTail()
    path = started(tail)
    tail.events = [text_answer(101), event(102, "turn/end", turn=2, outcome="budget_exceeded")]
    spent = final_answer(success=False, budget_exceeded=True)
    assert path.fold(spent, "terminal") is None
    assert path.divergence == "a completion other than a final answer"


def test_a_stop_at_max_turns_compacts() -> None:
    # No OMA event says it: the loop's fact marks it (``TurnLimitReached``).
    tail = FakeTail()
    path = started(tail)
    tail.marked = "task 'b' stopped at max_turns (1)"
    stopped = at(with_entries(journaled(), entry(mark=100)), 100)
    assert path.fold(stopped, "terminal") is None
    assert path.divergence == "task 'b' stopped at max_turns (1)"


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
        await path.commit(101)
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


async def test_a_committed_result_folds_into_the_commit() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    view = path.fold(after_answer(), "assistant_tool_turn")
    assert view is not None
    await path.commit(101)
    tail.events = [tool_call(102, sources=[101]), tool_result(103, sources=[102])]
    committed = executing(committed=True, turns=2, token_usage=TokenUsage(3, 4))
    snapshot = at(with_entries(journaled(), replace(committed, journal_seq=103)), 103)
    assert path.fold(snapshot, "tool_commit") is not None, path.divergence


def with_seq(snapshot: CheckpointSnapshot, seq: int) -> CheckpointSnapshot:
    return replace(
        snapshot, in_flight=tuple(replace(e, journal_seq=seq) for e in snapshot.in_flight)
    )

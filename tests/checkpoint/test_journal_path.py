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
from oma_actors.checkpoint.snapshot import RunIdentity
from oma_actors.domain.messages import Message, TextBlock, TokenUsage
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


def after_answer(*, goal_changed: bool = False, **changes: object) -> CheckpointSnapshot:
    """The run after event 101 (the tool turn for tu-1, usage 2/3) with b's mark at 101."""
    item = executing(turns=2, token_usage=TokenUsage(3, 4))
    item = replace(item, journal_seq=101)
    if changes:
        item = replace(item, state=replace(item.state, **changes))
    snapshot = at(with_entries(journaled(), item), 101)
    return replace(snapshot, goal="another goal") if goal_changed else snapshot


async def test_a_boundary_whose_events_fold_to_its_state_is_saved_by_the_journal() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    snapshot = after_answer()
    view = path.fold(snapshot, "assistant_tool_turn")
    assert view is not None, path.divergence
    await path.commit(view, 101)
    assert tail.waited == [101]  # saved only once its events are durable


def test_a_member_the_fold_does_not_carry_compacts_and_says_which() -> None:
    # A commit that consumes a pending approval, new shared memory ...: no event carries them.
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    assert path.fold(after_answer(goal_changed=True), "assistant_tool_turn") is None
    assert path.divergence == "goal changed, which the fold does not carry"


def test_a_runner_flag_no_event_carries_compacts() -> None:
    # A tool turn over the token budget: the fold would restore it with budget left.
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    view = path.fold(after_answer(), "assistant_tool_turn")
    assert view is not None
    path._view = view
    tail.events = [tool_call(102, sources=[101])]
    over = with_seq(replace(after_answer(budget_exceeded=True), journal_watermark_seq=102), 102)
    assert path.fold(over, "tool_dispatch") is None
    assert path.divergence == "task 'b': budget_exceeded changed, which the fold does not carry"


def test_a_loop_warning_for_the_results_compacts() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    view = path.fold(after_answer(), "assistant_tool_turn")
    assert view is not None
    path._view = view
    tail.events = [tool_call(102, sources=[101])]
    warned = after_answer(pending_tool_result_text="you are looping")
    warned = with_seq(replace(warned, journal_watermark_seq=102), 102)
    assert path.fold(warned, "tool_dispatch") is None
    assert path.divergence == (
        "task 'b': pending_tool_result_text changed, which the fold does not carry"
    )


def test_an_approval_bound_to_a_pending_call_compacts() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    view = path.fold(after_answer(), "assistant_tool_turn")
    assert view is not None
    path._view = view
    tail.events = [tool_call(102, sources=[101])]
    [item] = after_answer().in_flight[0].state.pending
    decided = (replace(item, approval_decision=object()),)  # type: ignore[arg-type]
    bound = with_seq(replace(after_answer(pending=decided), journal_watermark_seq=102), 102)
    assert path.fold(bound, "tool_dispatch") is None
    assert path.divergence == (
        "task 'b': the approval of call 'tu-1' changed, which the fold does not carry"
    )


def test_a_task_change_other_than_a_start_compacts() -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [assistant_tool_turn(101)]
    snapshot = after_answer()
    tasks = tuple(replace(t, status="failed") if t.id == "c" else t for t in snapshot.tasks)
    assert path.fold(replace(snapshot, tasks=tasks), "assistant_tool_turn") is None
    assert path.divergence == "task 'c' changed other than by its start"


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


def test_an_admission_whose_identity_no_run_start_carries_compacts() -> None:
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    restored = replace(journaled(entry(mark=100)), message_bus=None)
    path.seed(restored, NEXT)
    other = replace(NEXT, attempt=3)
    assert path.fold(at(replace(restored, attempt=3, identity=other), 101), "admission") is None
    assert path.divergence is not None
    assert "attempt changed" in path.divergence


def test_the_seeded_view_holds_the_bus_the_codec_writes_back_as_none() -> None:
    # The run's snapshots hold no message bus: the codec writes its source's (or an empty one).
    tail = FakeTail()
    path = JournalPath(tail, unsafe={})
    restored = journaled(entry(mark=100))
    empty = {"version": 1, "messages": [], "readState": []}
    path.seed(replace(restored, message_bus=empty), NEXT)
    admission = at(replace(restored, attempt=2, identity=NEXT, message_bus=None), 101)
    assert path.fold(admission, "admission") is not None, path.divergence
    other = {"version": 1, "messages": [{"id": "m"}], "readState": []}
    path.seed(replace(restored, message_bus=other), NEXT)
    assert path.fold(admission, "admission") is None
    assert path.divergence == "message_bus changed, which the fold does not carry"


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


@pytest.mark.parametrize(
    "changes",
    [{"success": False}, {"budget_exceeded": True}, {"final_output": "other"}],
    ids=["failed", "budget", "output"],
)
def test_a_completion_other_than_a_final_answer_compacts(changes: dict[str, object]) -> None:
    tail = FakeTail()
    path = started(tail)
    tail.events = [text_answer(101), event(102, "turn/end", turn=2, outcome="completed")]
    assert path.fold(final_answer(**changes), "terminal") is None
    assert path.divergence is not None
    assert path.divergence.startswith("task 'b': ")


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


def with_seq(snapshot: CheckpointSnapshot, seq: int) -> CheckpointSnapshot:
    return replace(
        snapshot, in_flight=tuple(replace(e, journal_seq=seq) for e in snapshot.in_flight)
    )

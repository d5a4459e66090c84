"""``strand_unresumable``: a task whose dispatched call a restore cannot resume fails closed."""

from __future__ import annotations

from dataclasses import replace

from fold_support import entry, executing, journaled

from oma_actors.checkpoint.stranded import strand_unresumable
from oma_actors.journal.fold import StartedCall


def started(task: str, call: str = "tu-9", agent: str = "worker") -> StartedCall:
    return StartedCall(task_id=task, agent_name=agent, call_id=call, seq=150, has_result=False)


def test_a_call_the_entry_holds_leaves_it_as_it_is() -> None:
    snapshot = journaled(executing())
    same, stranded = strand_unresumable(snapshot, [started("b", "tu-1")])
    assert (same, stranded) == (snapshot, ())


def test_a_call_the_entry_does_not_hold_fails_its_task_closed() -> None:
    snapshot = journaled(entry())
    changed, stranded = strand_unresumable(snapshot, [started("b"), started("b")])
    assert [call.call_id for call in stranded] == ["tu-9"]  # once, however often it is named
    [b] = changed.in_flight
    assert (b.state.phase, b.state.success, b.state.retryable) == ("completed", False, False)
    assert b.state.final_output.startswith("TOOL_OUTCOME_UNKNOWN: tool call(s) tu-9")
    assert b.state.conversation == entry().state.conversation  # kept, for the audit


def test_a_started_task_without_an_entry_gets_a_failed_one() -> None:
    pending = journaled(entry())
    tasks = tuple(
        replace(t, status="pending", assignee=None) if t.id == "c" else t for t in pending.tasks
    )
    changed, stranded = strand_unresumable(replace(pending, tasks=tasks), [started("c")])
    assert [call.task_id for call in stranded] == ["c"]
    [c] = [e for e in changed.in_flight if e.task_id == "c"]
    assert (c.assignee, c.state.phase, c.state.success) == ("worker", "completed", False)
    [task] = [t for t in changed.tasks if t.id == "c"]
    assert (task.status, task.assignee) == ("in_progress", "worker")


def test_a_finished_task_a_delegated_child_or_no_task_strands_nothing() -> None:
    snapshot = journaled(entry())
    calls = [started("a"), started("b", agent="child"), started("zzz"), started("b", agent="")]
    calls[-1] = replace(calls[-1], agent_name=None)
    assert strand_unresumable(snapshot, calls) == (snapshot, ())

"""The run-level fold rules (D14): a task's start and a completion's announcement."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fold_support import assistant_tool_turn, entry, event, journaled, tool_call

from oma_actors.clock import from_iso
from oma_actors.journal.fold import Discarded, Folded, fold_tail

if TYPE_CHECKING:
    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.journal.event import JournalEvent

STAMP = "2026-12-02T01:02:03.456Z"


def pending_c() -> object:
    snapshot = journaled(entry(mark=100))
    tasks = tuple(replace(t, status="pending") if t.id == "c" else t for t in snapshot.tasks)
    return replace(snapshot, tasks=tasks, announced=())


def test_a_start_with_the_queues_stamp_puts_the_task_in_progress() -> None:
    start = event(
        101, "task/status", task="c", agent="helper", status="in_progress", updatedAt=STAMP
    )
    result = fold_tail(pending_c(), [start])  # type: ignore[arg-type]
    assert isinstance(result, Folded)
    [c] = [t for t in result.snapshot.tasks if t.id == "c"]
    assert (c.status, c.assignee, c.updated_at) == ("in_progress", "helper", from_iso(STAMP))


def test_a_start_without_a_stamp_omas_event_is_not_folded() -> None:
    start = event(101, "task/status", task="c", status="in_progress")
    result = fold_tail(pending_c(), [start])  # type: ignore[arg-type]
    assert isinstance(result, Folded)
    assert result.snapshot.tasks == pending_c().tasks  # type: ignore[attr-defined]


def test_a_start_at_or_below_the_watermark_is_already_in_the_snapshot() -> None:
    start = event(100, "task/status", task="c", status="in_progress", updatedAt=STAMP)
    result = fold_tail(pending_c(), [start])  # type: ignore[arg-type]
    assert result.snapshot.tasks == pending_c().tasks  # type: ignore[attr-defined]


def test_a_start_of_a_terminal_task_discards_the_tail() -> None:
    start = event(101, "task/status", task="a", status="in_progress", updatedAt=STAMP)
    result = fold_tail(pending_c(), [start])  # type: ignore[arg-type]
    assert isinstance(result, Discarded)
    assert "which is completed" in result.reason


def test_a_malformed_stamp_discards_the_tail() -> None:
    start = event(101, "task/status", task="c", status="in_progress", updatedAt="yesterday")
    result = fold_tail(pending_c(), [start])  # type: ignore[arg-type]
    assert isinstance(result, Discarded)
    assert "updatedAt" in result.reason


def test_a_completion_event_announces_a_completed_task_only() -> None:
    done = event(101, "task/status", task="a", status="completed")
    early = event(102, "task/status", task="c", status="completed")  # not completed in it
    result = fold_tail(pending_c(), [done, early])  # type: ignore[arg-type]
    assert isinstance(result, Folded)
    assert result.snapshot.announced == ("a",)


# -- a new conversation (issue 19): its task's start and its prompt open its entry ----------


def prompt(seq: int, **kw: Any) -> JournalEvent:
    message = {"role": "user", "content": [{"type": "text", "text": "# Task: c"}]}
    return event(seq, "user/message", task="c", message=message, origin="input", **kw)


def start_c(seq: int = 101, agent: str = "helper") -> JournalEvent:
    return event(seq, "task/status", task="c", agent=agent, status="in_progress", updatedAt=STAMP)


def journal_first() -> CheckpointSnapshot:
    snapshot: CheckpointSnapshot = pending_c()  # type: ignore[assignment]
    return replace(snapshot, journal_ref={"kind": "JsonlRunJournal", "durable": True})


def test_a_started_tasks_prompt_and_answer_open_its_entry() -> None:
    turn = assistant_tool_turn(103, task="c", agent="helper")
    events = [start_c(), prompt(102, agent="helper"), turn]
    result = fold_tail(journal_first(), events)
    assert isinstance(result, Folded)
    [opened] = [e for e in result.snapshot.in_flight if e.task_id == "c"]
    assert (opened.assignee, opened.state.phase, opened.journal_seq) == (
        "helper", "executing_tools", 103,
    )  # fmt: skip
    assert [m.role for m in opened.state.conversation] == ["user", "assistant"]
    assert [m.role for m in opened.state.messages] == ["assistant"]  # the prompt is not one
    assert [p.call.id for p in opened.state.pending] == ["tu-1"]


def test_a_conversation_holding_only_its_prompt_is_opened() -> None:
    # A snapshot holds such a conversation from its prompt on (``RunJournaling.opened``): the
    # fold gives the same, so a snapshot written here and the fold to here agree.
    result = fold_tail(journal_first(), [start_c(), prompt(102, agent="helper")])
    assert isinstance(result, Folded)
    assert [e.task_id for e in result.snapshot.in_flight] == ["b", "c"]
    opened = result.snapshot.in_flight[1]
    assert (opened.state.phase, len(opened.state.conversation), opened.journal_seq) == (
        "awaiting_model", 1, 102,
    )  # fmt: skip


def test_a_prompt_of_another_agent_than_the_assignee_opens_nothing() -> None:
    # A delegated child's conversation carries its parent's task but is never an entry (JR-13).
    turn = assistant_tool_turn(103, task="c", agent="child")
    events = [start_c(), prompt(102, agent="child"), turn]
    result = fold_tail(journal_first(), events)
    assert isinstance(result, Folded)
    assert [e.task_id for e in result.snapshot.in_flight] == ["b"]


def test_omas_mode_opens_no_conversation() -> None:
    # Not journal-first: OMA's fold, where a task without an entry starts over (JR-13).
    turn = assistant_tool_turn(103, task="c", agent="helper")
    result = fold_tail(pending_c(), [start_c(), prompt(102, agent="helper"), turn])  # type: ignore[arg-type]
    assert isinstance(result, Folded)
    assert [e.task_id for e in result.snapshot.in_flight] == ["b"]


# -- a started task a journal-first snapshot lost (written by versions before 66e1187) --------


def in_progress_c(agent: str = "helper") -> CheckpointSnapshot:
    """A journal-first snapshot whose task ``c`` is in progress under ``agent`` with no entry:
    its prompt is below the watermark (100), where the writer should have held it."""
    snapshot = journal_first()
    tasks = tuple(
        replace(t, status="in_progress", assignee=agent) if t.id == "c" else t
        for t in snapshot.tasks
    )
    return replace(snapshot, tasks=tasks)


def test_a_conversation_the_snapshot_lost_discards_the_tail() -> None:
    # Dropped, its committed calls would run again: the task would start over.
    events = [
        assistant_tool_turn(101, task="c", agent="helper"),
        tool_call(102, task="c", agent="helper"),
    ]
    result = fold_tail(in_progress_c(), events)
    assert isinstance(result, Discarded)
    assert "task 'c'" in result.reason
    assert "does not hold" in result.reason
    assert result.seq == 101
    assert [call.call_id for call in result.started_calls] == ["tu-1"]  # salvage: never re-run


def test_a_lost_conversation_is_only_the_assignees_and_only_journal_first() -> None:
    turn = assistant_tool_turn(101, task="c", agent="child")  # a delegated child: not an entry
    assert isinstance(fold_tail(in_progress_c(), [turn]), Folded)
    helper = assistant_tool_turn(101, task="c", agent="helper")
    omas = replace(in_progress_c(), journal_ref={"kind": "JsonlRunJournal"})
    assert isinstance(fold_tail(omas, [helper]), Folded)  # OMA's fold: the task starts over
    # Started again in the tail, its new prompt opens it (the lost try is not resumed).
    again = [
        start_c(101),
        prompt(102, agent="helper"),
        assistant_tool_turn(103, task="c", agent="helper"),
    ]
    assert isinstance(fold_tail(in_progress_c(), again), Folded)

"""The run-level fold rules (D14): a task's start and a completion's announcement."""

from __future__ import annotations

from dataclasses import replace

from fold_support import entry, event, journaled

from oma_actors.checkpoint.fold import Discarded, Folded, fold_tail
from oma_actors.clock import from_iso

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

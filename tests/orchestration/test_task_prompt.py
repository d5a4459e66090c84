"""The prompt a task's agent gets: OMA's ``buildTaskPrompt`` text to the letter (payload
``output``), read in OMA v1.16.1 ``orchestrator/task-execution.ts``."""

from __future__ import annotations

from oma_actors.domain.tasks import TaskState
from oma_actors.orchestration.prompts import task_prompt


def _task(title: str, status: str = "completed", result: str | None = None) -> TaskState:
    return TaskState(
        id=title.lower(), title=title, description=f"do {title}", status=status,  # type: ignore[arg-type]
        assignee="w", result=result,
    )  # fmt: skip


def test_prerequisite_outputs_follow_one_another_without_a_blank_line() -> None:
    deps = [_task("A", result="a out"), _task("B", result="b out")]
    assert task_prompt(_task("C", "pending"), deps) == (
        "# Task: C\n\ndo C\n\n## Context from prerequisite tasks\n\n"
        "### A (by w)\na out\n### B (by w)\nb out"
    )


def test_a_prerequisite_without_output_is_left_out_and_no_section_stands_empty() -> None:
    empty = _task("E", result="")
    assert task_prompt(_task("C", "pending"), [empty, _task("F", "failed", "x")]) == (
        "# Task: C\n\ndo C"
    )
    with_one = task_prompt(_task("C", "pending"), [empty, _task("A", result="a out")])
    assert with_one.endswith("## Context from prerequisite tasks\n\n### A (by w)\na out")
    assert "### E" not in with_one

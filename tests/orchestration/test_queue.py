"""Task queue state machine (spec section 15) and graph validation."""

from __future__ import annotations

import pytest

from oma_actors import ConfigurationError, Task, TaskGraphError
from oma_actors.domain.results import RunOutcome
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.results import run_status


def statuses(queue: TaskQueue) -> dict[str, str]:
    return {task.title: task.status for task in queue.tasks}


def test_dependencies_by_title_or_id_start_blocked() -> None:
    a = Task("a", "A")
    b = Task("b", "B", depends_on=[a.id])
    c = Task("c", "C", depends_on=["  A ", "b"])  # titles match trimmed, case-insensitively
    queue = TaskQueue.from_tasks([a, b, c])
    assert statuses(queue) == {"a": "pending", "b": "blocked", "c": "blocked"}
    assert queue.get(c.id).depends_on == (a.id, b.id)
    assert [task.title for task in queue.ready()] == ["a"]


def test_complete_unblocks_only_fully_satisfied_dependents() -> None:
    a, b = Task("a", "A"), Task("b", "B")
    c = Task("c", "C", depends_on=["a", "b"])
    queue = TaskQueue.from_tasks([a, b, c])
    queue.start(a.id, "w")
    assert queue.complete(a.id, "out a") == []
    assert queue.get(c.id).status == "blocked"
    queue.start(b.id, "w")
    ready = queue.complete(b.id, "out b")
    assert [task.id for task in ready] == [c.id]
    assert queue.get(a.id).result == "out a"


def test_fail_cascades_recursively_and_spares_independent_tasks() -> None:
    a = Task("a", "A")
    b = Task("b", "B", depends_on=["a"])
    c = Task("c", "C", depends_on=["b"])
    d = Task("d", "D")
    queue = TaskQueue.from_tasks([a, b, c, d])
    queue.start(a.id, "w")
    cascade = queue.fail(a.id, "boom")
    assert [task.id for task in cascade] == [b.id, c.id]
    assert statuses(queue) == {"a": "failed", "b": "failed", "c": "failed", "d": "pending"}
    assert queue.get(b.id).result == f'Cancelled: dependency "{a.id}" failed.'
    assert queue.get(c.id).result == f'Cancelled: dependency "{b.id}" failed.'


def test_skip_cascades_even_when_other_dependencies_completed() -> None:
    a, b = Task("a", "A"), Task("b", "B")
    c = Task("c", "C", depends_on=["a", "b"])
    queue = TaskQueue.from_tasks([a, b, c])
    queue.start(a.id, "w")
    queue.complete(a.id, "ok")
    queue.skip(b.id, "not needed")
    assert queue.get(c.id).status == "skipped"
    assert queue.get(c.id).result == f'Skipped: dependency "{b.id}" was skipped.'
    assert queue.is_complete


def test_skip_remaining_and_reset_in_progress() -> None:
    a = Task("a", "A")
    b = Task("b", "B", depends_on=["a"])
    queue = TaskQueue.from_tasks([a, b])
    queue.start(a.id, "w")
    assert [task.id for task in queue.reset_in_progress()] == [a.id]
    assert statuses(queue) == {"a": "pending", "b": "blocked"}
    skipped = queue.skip_remaining("Skipped: run aborted.")
    assert {task.id for task in skipped} == {a.id, b.id}
    assert queue.is_complete


def test_empty_queue_is_complete() -> None:
    assert TaskQueue.from_tasks([]).is_complete


@pytest.mark.parametrize(
    ("tasks", "message", "named"),
    [
        ([Task("a", "A", id="x", depends_on=["nope"])], "unknown task 'nope'", ["x"]),
        ([Task("a", "A", id="x", depends_on=["a"])], "depends on itself", ["x"]),
        ([Task("a", "A", id="x"), Task("b", "B", id="x")], "duplicate task id", ["x"]),
        (
            [
                Task("a", "A", id="1"),
                Task("a", "A2", id="2"),
                Task("c", "C", id="3", depends_on=["a"]),
            ],
            "matches several tasks",
            ["3", "1", "2"],
        ),
    ],
)
def test_invalid_graphs_name_the_tasks(tasks: list[Task], message: str, named: list[str]) -> None:
    with pytest.raises(TaskGraphError, match=message) as info:
        TaskQueue.from_tasks(tasks)
    assert list(info.value.tasks) == named


def test_cycle_names_every_task_of_the_cycle() -> None:
    a = Task("a", "A", id="A", depends_on=["c"])
    b = Task("b", "B", id="B", depends_on=["a"])
    c = Task("c", "C", id="C", depends_on=["b"])
    ok = Task("d", "D", id="D")
    with pytest.raises(TaskGraphError, match="dependency cycle") as info:
        TaskQueue.from_tasks([ok, a, b, c])
    assert sorted(info.value.tasks) == ["A", "B", "C"]


def test_only_a_pending_task_starts_and_an_unknown_id_is_named() -> None:
    a = Task("a", "A")
    b = Task("b", "B", depends_on=["a"])
    queue = TaskQueue.from_tasks([a, b])
    with pytest.raises(ConfigurationError, match=f"task {b.id!r} is blocked, not pending"):
        queue.start(b.id, "w")  # its dependency has not completed
    queue.start(a.id, "w")
    with pytest.raises(ConfigurationError, match=f"task {a.id!r} is in_progress, not pending"):
        queue.start(a.id, "other")  # never two runners on one task
    assert queue.get(a.id).assignee == "w"
    with pytest.raises(ConfigurationError, match="unknown task id 'ghost'"):
        queue.get("ghost")


def test_a_run_with_a_task_left_unfinished_is_no_success() -> None:
    # Nothing failed, but a task never ran to an end: the run did not do its work (TQ-07).
    a, b = Task("a", "A"), Task("b", "B")
    queue = TaskQueue.from_tasks([a, b])
    queue.start(a.id, "w")
    queue.complete(a.id, "done")
    assert run_status(queue) == RunOutcome("error", "1 task(s) did not finish")
    queue.start(b.id, "w")
    queue.complete(b.id, "done")
    assert run_status(queue) == RunOutcome("ok")

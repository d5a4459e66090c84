"""The pure restore planner (spec OR-06..OR-09, ID-03, ID-04) on snapshots built in memory.

``plan_restore`` does no I/O, so each test builds a ``CheckpointSnapshot`` directly and checks one
rule of the plan: which run and attempt continue, which tasks are skipped or resumed, which results
are recovered, and which inconsistent snapshots are refused before anything runs.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oma_actors import AgentConfig, Team
from oma_actors.checkpoint import CheckpointSnapshot, CompletedTask, InFlightTask
from oma_actors.domain.inflight import RunnerState
from oma_actors.domain.messages import Message, TextBlock, TokenUsage
from oma_actors.domain.results import AgentRunResult
from oma_actors.domain.tasks import TaskState
from oma_actors.errors import CheckpointError, RunIdMismatchError, TaskGraphError
from oma_actors.orchestration.restore_plan import RestorePlan, plan_restore

T0 = datetime(2025, 11, 5, 11, 58, 0, 125000, tzinfo=UTC)
TEAM = Team("t", [AgentConfig("worker"), AgentConfig("reviewer")])


def task(
    task_id: str,
    status: str,
    *,
    assignee: str | None = "worker",
    depends_on: tuple[str, ...] = (),
    result: str | None = None,
) -> TaskState:
    """A task with fixed timestamps, titled by its id."""
    return TaskState(
        id=task_id,
        title=task_id,
        description=f"do {task_id}",
        status=status,  # type: ignore[arg-type]
        assignee=assignee,
        depends_on=depends_on,
        result=result,
        created_at=T0,
        updated_at=T0,
    )


def runner(text: str = "resume me") -> RunnerState:
    """A runner state waiting for its next model call."""
    return RunnerState(phase="awaiting_model", conversation=(Message("user", [TextBlock(text)]),))


def snapshot(
    *tasks: TaskState,
    run_id: str = "run-1",
    attempt: int = 1,
    completed: tuple[CompletedTask, ...] = (),
    in_flight: tuple[InFlightTask, ...] = (),
) -> CheckpointSnapshot:
    """A v4 ``runTasks`` snapshot of ``tasks``."""
    return CheckpointSnapshot(
        version=4,
        mode="runTasks",
        run_id=run_id,
        attempt=attempt,
        revision=3,
        created_at="2025-11-05T12:00:00.000Z",
        tasks=tasks,
        completed=completed,
        in_flight=in_flight,
    )


def mid_run() -> CheckpointSnapshot:
    """``a`` completed, ``b`` in flight after it, ``c`` blocked on ``b``."""
    return snapshot(
        task("a", "completed", result="a done"),
        task("b", "in_progress", depends_on=("a",)),
        task("c", "blocked", assignee="reviewer", depends_on=("b",)),
        completed=(
            CompletedTask(task_id="a", assignee="worker", result="a done", agent_result=None),
        ),
        in_flight=(InFlightTask(task_id="b", assignee="worker", state=runner()),),
    )


def plan(snap: CheckpointSnapshot, requested: str | None = None) -> RestorePlan:
    return plan_restore(snap, TEAM, requested)


# -- identity: which run, which attempt (ID-03, ID-04) --------------------------------------------


def test_another_requested_run_id_is_refused_with_both_ids() -> None:
    with pytest.raises(RunIdMismatchError) as info:
        plan(mid_run(), "run-2")
    assert (info.value.expected, info.value.found) == ("run-2", "run-1")


def test_the_same_or_no_requested_run_id_continues_the_stored_run() -> None:
    assert plan(mid_run(), "run-1").run_id == "run-1"
    assert plan(mid_run(), None).run_id == "run-1"


def test_a_snapshot_without_run_id_takes_the_requested_one() -> None:
    """A v1 snapshot has no run id: the caller's id is adopted, not a mismatch."""
    assert plan(snapshot(task("a", "pending"), run_id=""), "run-9").run_id == "run-9"


def test_no_run_id_anywhere_gets_a_fresh_one() -> None:
    first = plan(snapshot(task("a", "pending"), run_id="")).run_id
    second = plan(snapshot(task("a", "pending"), run_id="")).run_id
    assert first
    assert first != second


@pytest.mark.parametrize("attempt", [1, 4])
def test_the_attempt_is_the_stored_one_plus_one(attempt: int) -> None:
    assert plan(snapshot(task("a", "pending"), attempt=attempt)).attempt == attempt + 1


# -- what runs again, what is skipped, what resumes (OR-06..OR-08) ---------------------------------


def test_only_completed_tasks_are_skipped_in_task_order() -> None:
    snap = snapshot(
        task("b", "completed", result="b done"),
        task("f", "failed", result="boom"),
        task("s", "skipped"),
        task("a", "completed", result="a done"),
        task("p", "pending"),
    )
    assert plan(snap).skipped_ids == ("b", "a")


def test_in_flight_entries_resume_with_their_assignee_and_runner_state() -> None:
    snap = mid_run()
    resumed = plan(snap).resume
    assert list(resumed) == ["b"]
    assignee, state = resumed["b"]
    assert assignee == "worker"
    assert state is snap.in_flight[0].state


def test_in_progress_tasks_go_back_to_pending_in_the_queue() -> None:
    queue = plan(mid_run()).queue
    assert [(t.id, t.status) for t in queue.tasks] == [
        ("a", "completed"),
        ("b", "pending"),
        ("c", "blocked"),
    ]
    assert [t.id for t in queue.ready()] == ["b"]


@pytest.mark.parametrize(
    ("statuses", "finished"),
    [(("completed", "completed"), True), (("completed", "failed"), False), (("pending",), False)],
)
def test_finished_only_when_every_task_completed(statuses: tuple[str, ...], finished: bool) -> None:
    snap = snapshot(*(task(f"t{i}", status) for i, status in enumerate(statuses)))
    assert plan(snap).finished is finished


# -- recovered results (OR-09) ---------------------------------------------------------------------


def test_a_stored_agent_result_is_recovered_as_is() -> None:
    stored = AgentRunResult(success=True, output="a done", token_usage=TokenUsage(3, 2), turns=2)
    item = CompletedTask(task_id="a", assignee="worker", result="a done", agent_result=stored)
    snap = snapshot(task("a", "completed", result="a done"), completed=(item,))
    assert plan(snap).results == {"a": stored}


def test_a_result_without_agent_result_becomes_a_successful_output() -> None:
    item = CompletedTask(task_id="a", assignee="worker", result="stored text", agent_result=None)
    snap = snapshot(task("a", "completed", result="queue text"), completed=(item,))
    assert plan(snap).results == {"a": AgentRunResult(success=True, output="stored text")}


def test_a_missing_result_text_falls_back_to_the_task_result_then_empty() -> None:
    items = (
        CompletedTask(task_id="a", assignee="worker", result=None, agent_result=None),
        CompletedTask(task_id="gone", assignee="worker", result=None, agent_result=None),
    )
    snap = snapshot(task("a", "completed", result="queue text"), completed=items)
    assert plan(snap).results == {
        "a": AgentRunResult(success=True, output="queue text"),
        "gone": AgentRunResult(success=True, output=""),
    }


# -- refused before anything runs -------------------------------------------------------------------


def test_an_unknown_dependency_is_a_checkpoint_error() -> None:
    snap = snapshot(task("a", "pending", depends_on=("ghost", "phantom")))
    with pytest.raises(CheckpointError, match=r"unknown task id\(s\) ghost, phantom"):
        plan(snap)


def test_a_dependency_cycle_is_a_checkpoint_error() -> None:
    snap = snapshot(
        task("a", "blocked", depends_on=("b",)), task("b", "blocked", depends_on=("a",))
    )
    with pytest.raises(CheckpointError, match="Invalid checkpoint task dependencies") as info:
        plan(snap)
    assert type(info.value) is CheckpointError


@pytest.mark.parametrize(
    "tasks",
    [
        (task("a", "completed", result="a done"),),  # the task finished
        (task("a", "pending"),),  # the task never started
        (),  # the task is not in the snapshot at all
    ],
    ids=["completed", "pending", "unknown"],
)
def test_an_in_flight_entry_for_a_task_not_in_progress_is_refused(
    tasks: tuple[TaskState, ...],
) -> None:
    entry = InFlightTask(task_id="a", assignee="worker", state=runner())
    with pytest.raises(CheckpointError, match="task 'a' is not in progress"):
        plan(snapshot(*tasks, in_flight=(entry,)))


def test_an_in_flight_entry_of_another_agent_is_refused() -> None:
    entry = InFlightTask(task_id="a", assignee="reviewer", state=runner())
    snap = snapshot(task("a", "in_progress"), in_flight=(entry,))
    with pytest.raises(CheckpointError, match="assigned to 'worker', not 'reviewer'"):
        plan(snap)


def test_an_unfinished_task_of_an_agent_the_team_lost_is_refused() -> None:
    snap = snapshot(
        task("a", "pending", assignee="gone"),
        task("b", "blocked", assignee="also-gone", depends_on=("a",)),
        task("c", "pending", assignee="worker"),
    )
    with pytest.raises(TaskGraphError, match="'a' -> 'gone', 'b' -> 'also-gone'") as info:
        plan(snap)
    assert info.value.tasks == ("a", "b")


def test_finished_or_unassigned_tasks_need_no_agent_in_the_team() -> None:
    snap = snapshot(
        task("a", "completed", assignee="gone", result="a done"),
        task("f", "failed", assignee="gone"),
        task("s", "skipped", assignee="gone"),
        task("u", "pending", assignee=None),
    )
    assert plan(snap).skipped_ids == ("a",)

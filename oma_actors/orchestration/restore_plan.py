"""Planning a restore from a snapshot (spec OR-06..OR-09, TQ-13, ID-03, ID-04). Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.clock import SYSTEM_CLOCK, Clock
from oma_actors.domain.results import AgentRunResult
from oma_actors.errors import CheckpointError, RunIdMismatchError, TaskGraphError
from oma_actors.ids import new_id
from oma_actors.orchestration.graph import check_acyclic
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.results import UNKNOWN_AGENT

if TYPE_CHECKING:
    from oma_actors.agents.config import Team
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.snapshot import CheckpointSnapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class RestorePlan:
    """How a run continues: its identity, queue, resumable runners and recovered results."""

    run_id: str
    attempt: int
    queue: TaskQueue
    resume: dict[str, tuple[str, RunnerState]]
    results: dict[str, AgentRunResult]
    agents: dict[str, str]  # task id -> the agent its restored result is filed under
    skipped_ids: tuple[str, ...]
    finished: bool


def plan_restore(
    snapshot: CheckpointSnapshot,
    team: Team,
    requested_run_id: str | None,
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> RestorePlan:
    """Validate ``snapshot`` against the caller and the team and plan the continuation.

    A task whose assignee the team no longer has is refused here, before anything is written
    (OMA fails it at dispatch, spec LM-20, which records the failure for good: a restore with a
    team that lost an agent by mistake could not be corrected by restoring again).

    Raises:
        RunIdMismatchError: the caller asked for another run (ID-03).
        CheckpointError: the stored task graph, plan revisions or in-flight state are
            inconsistent (OR-07, TQ-13, OR-08).
        TaskGraphError: an unfinished task is assigned to an agent the team no longer has.
    """
    if requested_run_id and snapshot.run_id and requested_run_id != snapshot.run_id:
        raise RunIdMismatchError(expected=requested_run_id, found=snapshot.run_id)
    run_id = snapshot.run_id or requested_run_id or new_id()

    ids = {task.id for task in snapshot.tasks}
    graph = {task.id: task.depends_on for task in snapshot.tasks}
    missing = sorted({dep for deps in graph.values() for dep in deps if dep not in ids})
    if missing:
        raise CheckpointError(
            f"Invalid checkpoint task dependencies: unknown task id(s) {', '.join(missing)}"
        )
    try:
        check_acyclic(graph, {task.id: task.title for task in snapshot.tasks})
    except TaskGraphError as exc:
        raise CheckpointError(f"Invalid checkpoint task dependencies: {exc}") from None
    _check_plan(snapshot)

    by_id = {task.id: task for task in snapshot.tasks}
    resume: dict[str, tuple[str, RunnerState]] = {}
    for entry in snapshot.in_flight:
        task = by_id.get(entry.task_id)
        if task is None or task.status != "in_progress":
            raise CheckpointError(
                f"Invalid checkpoint in-flight state: task {entry.task_id!r} is not in progress"
            )
        if task.assignee != entry.assignee:
            raise CheckpointError(
                f"Invalid checkpoint in-flight state: task {entry.task_id!r} is assigned to "
                f"{task.assignee!r}, not {entry.assignee!r}"
            )
        resume[entry.task_id] = (entry.assignee, entry.state)

    roster = {agent.name for agent in team.agents}
    stranded = [
        task
        for task in snapshot.tasks
        if not task.is_terminal and task.assignee is not None and task.assignee not in roster
    ]
    if stranded:
        names = ", ".join(f"{task.title!r} -> {task.assignee!r}" for task in stranded)
        raise TaskGraphError(
            f"restored task(s) assigned to agents missing from the team: {names}",
            [task.id for task in stranded],
        )

    results: dict[str, AgentRunResult] = {}
    agents: dict[str, str] = {}
    for item in snapshot.completed:
        task = by_id.get(item.task_id)
        fallback = item.result or (task.result if task is not None else "")
        results[item.task_id] = item.agent_result or AgentRunResult(
            success=True, output=fallback or ""
        )
        # Spec OR-09: the entry's assignee, else its task's, else "unknown".
        agents[item.task_id] = item.assignee or (task.assignee if task else None) or UNKNOWN_AGENT

    queue = TaskQueue(snapshot.tasks, plan=snapshot.plan, clock=clock)
    queue.reset_in_progress()
    return RestorePlan(
        run_id=run_id,
        attempt=snapshot.attempt + 1,
        queue=queue,
        resume=resume,
        results=results,
        agents=agents,
        skipped_ids=tuple(task.id for task in snapshot.tasks if task.status == "completed"),
        finished=snapshot.is_finished,
    )


def _check_plan(snapshot: CheckpointSnapshot) -> None:
    """Refuse a queue v2 whose plan revision history does not fit its tasks (spec TQ-13).

    Raises:
        CheckpointError: the revisions are not numbered 1..n with ``n`` the current revision,
            or one names a task the queue does not hold.
    """
    plan = snapshot.plan
    if not plan.is_revised:
        return
    if plan.revision < 1 or len(plan.revisions) != plan.revision:
        raise CheckpointError(
            f"Invalid checkpoint plan: invalid plan revision sequence (revision {plan.revision}, "
            f"{len(plan.revisions)} recorded)"
        )
    ids = {task.id for task in snapshot.tasks}
    for number, revision in enumerate(plan.revisions, start=1):
        if revision.version != number or revision.trigger_task_id not in ids:
            raise CheckpointError(
                f"Invalid checkpoint plan: invalid plan revision history at revision {number}"
            )
        unknown = sorted(set(revision.referenced_task_ids) - ids)
        if unknown:
            raise CheckpointError(
                f"Invalid checkpoint plan: plan revision {number} references an unknown task: "
                f"{', '.join(unknown)}"
            )

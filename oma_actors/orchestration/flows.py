"""The three orchestrated flows: explicit tasks, a plan artifact, and a goal for a team."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.agents.runner import Emit, resolve_agent
from oma_actors.domain.results import RunStatus, TeamRunResult
from oma_actors.domain.tasks import PlanArtifact, Task
from oma_actors.errors import TaskGraphError
from oma_actors.ids import new_id
from oma_actors.orchestration.coordinator import (
    COORDINATOR_NAME,
    decompose,
    default_coordinator,
    synthesize,
)
from oma_actors.orchestration.execute import execute_queue
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.results import team_result
from oma_actors.orchestration.run import RunState
from oma_actors.orchestration.shared_memory import SharedMemory
from oma_actors.stores.memory import InMemoryStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.agents.config import AgentConfig, Team


def team_memory(team: Team) -> SharedMemory | None:
    """The team's shared memory for one run, or ``None`` when the team has none."""
    if team.shared_memory_store is not None:
        return SharedMemory(team.shared_memory_store)
    if team.shared_memory:
        return SharedMemory(InMemoryStore())
    return None


def check_assignees(team: Team, tasks: Sequence[Task]) -> None:
    """``TaskGraphError`` naming every task assigned to an agent outside the roster."""
    roster = {agent.name for agent in team.agents}
    unknown = [task for task in tasks if task.assignee is not None and task.assignee not in roster]
    if unknown:
        listed = ", ".join(f"{task.title!r} -> {task.assignee!r}" for task in unknown)
        raise TaskGraphError(
            f"unknown assignee(s): {listed} (team: {', '.join(sorted(roster))})",
            [task.id for task in unknown],
        )


def plan_tasks(plan: PlanArtifact) -> list[Task]:
    """The tasks of a plan artifact, ids and dependencies used exactly (spec PL-03)."""
    if plan.version != 1:
        raise TaskGraphError(f"Unsupported plan artifact version: {plan.version}")
    ids = [task.id for task in plan.tasks]
    for task in plan.tasks:
        unknown = [dep for dep in task.depends_on if dep not in ids]
        if unknown:
            raise TaskGraphError(
                f"Invalid plan artifact: task {task.id!r} depends on unknown id(s) "
                f"{', '.join(repr(dep) for dep in unknown)}",
                [task.id],
            )
        if not task.description.strip():
            raise TaskGraphError(
                f"Invalid plan artifact: task {task.id!r} has no description", [task.id]
            )
    return [
        Task(
            task.title,
            task.description,
            id=task.id,
            assignee=task.assignee,
            depends_on=task.depends_on,
        )
        for task in plan.tasks
    ]


async def run_task_list(
    team: Team, tasks: Sequence[Task], *, max_concurrency: int, emit: Emit
) -> TeamRunResult:
    """Validate ``tasks`` (before any work) and run them with ``team``."""
    check_assignees(team, tasks)
    queue = TaskQueue.from_tasks(tasks)
    run_id = new_id()
    state = await execute_queue(
        team,
        queue,
        run_id=run_id,
        memory=team_memory(team),
        max_concurrency=max_concurrency,
        emit=emit,
    )
    return team_result(run_id=run_id, attempt=1, queue=queue, state=state)


async def run_goal(
    team: Team,
    goal: str,
    *,
    coordinator: AgentConfig | None,
    plan_only: bool,
    max_concurrency: int,
    emit: Emit,
) -> TeamRunResult:
    """Decompose ``goal`` with the coordinator, run the plan, then synthesize (spec 14)."""
    run_id = new_id()
    lead = resolve_agent(coordinator or default_coordinator(team))
    plan = await decompose(lead, team, goal, run_id=run_id, emit=emit)
    planning = {COORDINATOR_NAME: plan.result}
    if plan.tasks is None:
        problem = plan.problem
        message = f"{problem.code}: {'; '.join(problem.errors)}" if problem else "no plan"
        return team_result(
            run_id=run_id,
            attempt=1,
            queue=TaskQueue([]),
            state=RunState(),
            extra_agent_results=planning,
            status=RunStatus("error", message),
        )
    queue = TaskQueue.from_tasks(plan.tasks)
    if plan_only:
        # A plan-only result lists every task as pending (spec CD-06): nothing was scheduled.
        return team_result(
            run_id=run_id,
            attempt=1,
            queue=TaskQueue(replace(task, status="pending") for task in queue.tasks),
            state=RunState(),
            extra_agent_results=planning,
            plan_only=True,
        )
    memory = team_memory(team)
    state = await execute_queue(
        team, queue, run_id=run_id, memory=memory, max_concurrency=max_concurrency, emit=emit
    )
    summary = await memory.summary() if memory is not None else ""
    synthesis = await synthesize(lead, goal, queue.tasks, summary, run_id=run_id, emit=emit)
    # Planning usage is charged to the run; the synthesis is the coordinator's visible result.
    planning_usage = plan.result.token_usage
    final = synthesis.result
    merged = replace(final, token_usage=final.token_usage + planning_usage)
    return team_result(
        run_id=run_id,
        attempt=1,
        queue=queue,
        state=state,
        extra_agent_results={COORDINATOR_NAME: merged},
    )

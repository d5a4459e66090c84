"""The orchestrated flows: explicit tasks, a plan artifact, and a goal for a team."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from oma_actors.agents.runner import resolve_agent
from oma_actors.checkpoint.run_writer import Saved
from oma_actors.clock import SYSTEM_CLOCK, Clock
from oma_actors.domain.results import RunStatus, TeamRunResult
from oma_actors.domain.tasks import PlanArtifact, Task
from oma_actors.errors import TaskGraphError
from oma_actors.ids import new_id
from oma_actors.orchestration.checkpointing import build_snapshot, new_checkpointing
from oma_actors.orchestration.coordinator import (
    COORDINATOR_NAME,
    decompose,
    default_coordinator,
    synthesize,
)
from oma_actors.orchestration.execute import RunApprovals, execute_queue
from oma_actors.orchestration.live import claim
from oma_actors.orchestration.plan_gate import plan_gate
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.results import team_result
from oma_actors.orchestration.run import RunState
from oma_actors.orchestration.shared_memory import SharedMemory

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.agents.config import AgentConfig, Team
    from oma_actors.agents.runner import Emit
    from oma_actors.approvals.gates import Gate
    from oma_actors.checkpoint.snapshot import RunMode
    from oma_actors.domain.messages import TokenUsage
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.orchestration.checkpointing import RunCheckpointing
    from oma_actors.orchestration.options import ResolvedCheckpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowContext:
    """The orchestrator settings every flow uses."""

    max_concurrency: int
    emit: Emit
    on_task_dispatch: Gate | None = None
    on_plan_ready: Gate | None = None
    on_tool_call: Gate | None = None
    clock: Clock = SYSTEM_CLOCK

    def approvals(self) -> RunApprovals:
        """The gates of a fresh run."""
        return RunApprovals(dispatch_gate=self.on_task_dispatch, tool_gate=self.on_tool_call)


def plan_view(queue: TaskQueue) -> TaskQueue:
    """A plan-only result lists every task as pending (spec CD-06): nothing was scheduled."""
    return TaskQueue(replace(task, status="pending") for task in queue.tasks)


def team_memory(team: Team) -> SharedMemory | None:
    """The team's shared memory for one run, or ``None`` when the team has none."""
    store = team.shared_memory_store
    return SharedMemory(store) if store is not None else None


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


async def run_queue(
    team: Team,
    queue: TaskQueue,
    *,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint | None,
    mode: RunMode,
    goal: str | None = None,
    planning_usage: TokenUsage | None = None,
) -> tuple[str, RunState, SharedMemory | None, RunCheckpointing | None]:
    """Run a validated queue as a fresh run, checkpointed when ``resolved`` is set."""
    run_id = (resolved.run_id if resolved else None) or new_id()
    checkpointing = None
    if resolved is not None:
        checkpointing = new_checkpointing(
            resolved,
            run_id=run_id,
            mode=mode,
            goal=goal,
            emit=ctx.emit,
            planning_usage=planning_usage,
            clock=ctx.clock,
        )
    memory = team_memory(team)
    state = await execute_queue(
        team,
        queue,
        run_id=run_id,
        memory=memory,
        max_concurrency=ctx.max_concurrency,
        emit=ctx.emit,
        checkpointing=checkpointing,
        approvals=ctx.approvals(),
        clock=ctx.clock,
    )
    return run_id, state, memory, checkpointing


async def run_task_list(
    team: Team,
    tasks: Sequence[Task],
    *,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint | None,
    mode: RunMode = "runTasks",
    goal: str | None = None,
) -> TeamRunResult:
    """Validate ``tasks`` (before any work) and run them with ``team``."""
    check_assignees(team, tasks)
    queue = TaskQueue.from_tasks(tasks, clock=ctx.clock)
    with claim_if(resolved):
        run_id, state, _, _ = await run_queue(
            team, queue, ctx=ctx, resolved=resolved, mode=mode, goal=goal
        )
    return team_result(run_id=run_id, attempt=1, queue=queue, state=state)


def claim_if(resolved: ResolvedCheckpoint | None) -> AbstractContextManager[None]:
    """Claim the checkpoint key of a checkpointed run (decision D9); a no-op otherwise."""
    return claim(resolved.store, resolved.key) if resolved is not None else nullcontext()


async def save_synthesis(
    checkpointing: RunCheckpointing | None,
    *,
    queue: TaskQueue,
    memory: SharedMemory | None,
    state: RunState,
    synthesis: AgentRunResult,
) -> None:
    """Persist a successful synthesis so a restore of the finished run returns it (D4).

    Best-effort like every ordinary save: the result is returned whether or not it is stored,
    and a failure is reported by the writer as ``CheckpointSaveFailed``.
    """
    if checkpointing is None or not synthesis.success:
        return
    snapshot = await build_snapshot(
        checkpointing,
        queue=queue,
        memory=memory,
        results=state.task_results,
        in_flight={},
        synthesis=synthesis,
    )
    outcome = await checkpointing.writer.save(snapshot, boundary="synthesis")
    if isinstance(outcome, Saved):
        state.revision = outcome.revision


async def run_goal(
    team: Team,
    goal: str,
    *,
    coordinator: AgentConfig | None,
    plan_only: bool,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint | None,
) -> TeamRunResult:
    """Decompose ``goal`` with the coordinator, run the plan, then synthesize (spec 14)."""
    lead = resolve_agent(coordinator or default_coordinator(team))
    planning_id = (resolved.run_id if resolved else None) or new_id()
    plan = await decompose(lead, team, goal, run_id=planning_id, emit=ctx.emit)
    planning = {COORDINATOR_NAME: plan.result}
    if plan.tasks is None:
        problem = plan.problem
        message = f"{problem.code}: {'; '.join(problem.errors)}" if problem else "no plan"
        return team_result(
            run_id=planning_id,
            attempt=1,
            queue=TaskQueue([]),
            state=RunState(),
            extra_agent_results=planning,
            status=RunStatus("error", message),
        )
    queue = TaskQueue.from_tasks(plan.tasks, clock=ctx.clock)
    if resolved is not None and resolved.run_id is None:
        resolved = replace(resolved, run_id=planning_id)
    if ctx.on_plan_ready is not None:
        with claim_if(resolved):
            stopped = await plan_gate(
                ctx,
                queue,
                goal=goal,
                run_id=planning_id,
                resolved=resolved,
                plan_only=plan_only,
                memory=team_memory(team),
            )
        if stopped is not None:
            return team_result(
                run_id=planning_id,
                attempt=1,
                queue=plan_view(queue),
                state=stopped,
                extra_agent_results=planning,
            )
    if plan_only:
        return team_result(
            run_id=planning_id,
            attempt=1,
            queue=plan_view(queue),
            state=RunState(),
            extra_agent_results=planning,
            plan_only=True,
        )
    with claim_if(resolved):
        run_id, state, memory, checkpointing = await run_queue(
            team,
            queue,
            ctx=ctx,
            resolved=resolved,
            mode="runTeam",
            goal=goal,
            planning_usage=plan.result.token_usage,
        )
        if state.status is not None:
            # Suspended, rejected or halted: there is nothing to synthesize yet (spec CD-07).
            return team_result(
                run_id=run_id, attempt=1, queue=queue, state=state, extra_agent_results=planning
            )
        summary = await memory.summary() if memory is not None else ""
        synthesis = await synthesize(lead, goal, queue.tasks, summary, run_id=run_id, emit=ctx.emit)
        await save_synthesis(
            checkpointing, queue=queue, memory=memory, state=state, synthesis=synthesis.result
        )
    # Planning usage is charged to the run; the synthesis is the coordinator's visible result.
    final = synthesis.result
    merged = replace(final, token_usage=final.token_usage + plan.result.token_usage)
    return team_result(
        run_id=run_id,
        attempt=1,
        queue=queue,
        state=state,
        extra_agent_results={COORDINATOR_NAME: merged},
    )

"""The orchestrated flows: explicit tasks, a plan artifact, and a goal for a team."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from oma_actors.checkpoint.run_writer import Saved
from oma_actors.clock import SYSTEM_CLOCK, Clock
from oma_actors.domain.tasks import PlanArtifact, Task
from oma_actors.errors import TaskGraphError
from oma_actors.ids import new_id
from oma_actors.orchestration.checkpointing import build_snapshot, new_checkpointing
from oma_actors.orchestration.execute import RunApprovals, execute_queue
from oma_actors.orchestration.journal_events import (
    ends_on_raise,
    finish_journal,
    record_plan,
    start_fresh,
    watch_memory,
)
from oma_actors.orchestration.journaling import RunJournaling
from oma_actors.orchestration.live import claim
from oma_actors.orchestration.ownership import owning, settle
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.results import run_status, team_result
from oma_actors.orchestration.shared_memory import SharedMemory

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.agents.config import Team
    from oma_actors.agents.runner import Emit
    from oma_actors.approvals.gates import Gate
    from oma_actors.domain.messages import TokenUsage
    from oma_actors.domain.results import AgentRunResult, TeamRunResult
    from oma_actors.domain.snapshot import RunMode
    from oma_actors.journal import JournalOptions
    from oma_actors.orchestration.budget import RunBudget
    from oma_actors.orchestration.checkpointing import RunCheckpointing
    from oma_actors.orchestration.options import ResolvedCheckpoint
    from oma_actors.orchestration.run import RunState
    from oma_actors.orchestration.scheduler import DependencyFirst
    from oma_actors.runs import RunLeaseHandle, RunStoreOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowContext:
    """The orchestrator settings every flow uses."""

    max_concurrency: int
    emit: Emit
    on_task_dispatch: Gate | None = None
    on_plan_ready: Gate | None = None
    on_tool_call: Gate | None = None
    clock: Clock = SYSTEM_CLOCK
    run_store: RunStoreOptions | None = None
    journal: JournalOptions | None = None
    budget: RunBudget | None = None

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
    run_id: str,
    goal: str | None = None,
    planning_usage: TokenUsage | None = None,
    lease: RunLeaseHandle | None = None,
    journaling: RunJournaling | None = None,
    scheduler: DependencyFirst | None = None,
) -> tuple[RunState, SharedMemory | None, RunCheckpointing | None]:
    """Run a validated queue as a fresh run, checkpointed when ``resolved`` is set.

    With ``lease`` every write is fenced by it and the run stops if it is lost. ``journaling``:
    the run's journal opened by the caller (``run_team``, which records ``run/start`` and the
    coordinator's calls first, and ``run/end`` after its synthesis); without it the journal in
    ``ctx`` is opened and finished here. ``scheduler``: the one that assigned the plan up front
    (``run_team``), so the dispatch continues its cursor; default a new one.
    """
    checkpointing = None
    owned = journaling is None
    if journaling is not None:
        record_plan(journaling, queue)
    elif ctx.journal is not None:
        # A journal records the run with or without a checkpoint (OMA journals every run).
        journaling = await open_journaling(
            ctx.journal, ctx, run_id=run_id, lease=lease, checkpointed=resolved is not None
        )
        start_fresh(journaling, mode=mode, goal=goal, queue=queue)
    # The caller that opened the journal ends it, on a raise too; here, the one opened here.
    async with ends_on_raise(journaling if owned else None):
        if resolved is not None:
            checkpointing = new_checkpointing(
                resolved,
                run_id=run_id,
                mode=mode,
                goal=goal,
                emit=ctx.emit,
                planning_usage=planning_usage,
                clock=ctx.clock,
                fence=lease,
                attempt=lease.attempt if lease is not None else 1,
                journaling=journaling,
            )
            if journaling is not None:
                journaling.attach(checkpointing.writer, team)
        memory = team_memory(team)
        watch_memory(journaling, memory)
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
            lease=lease,
            budget=ctx.budget,
            journaling=journaling,
            scheduler=scheduler,
        )
    if owned:
        await finish_journal(journaling, state.status or run_status(queue, state.task_results))
    return state, memory, checkpointing


async def open_journaling(
    options: JournalOptions,
    ctx: FlowContext,
    *,
    run_id: str,
    lease: RunLeaseHandle | None,
    checkpointed: bool,
) -> RunJournaling:
    """Open the journal ``options`` for a fresh attempt of ``run_id`` (the lease's attempt).

    Without a checkpoint no writer takes the events: they go straight to the journal, a
    durable one included (it is then no save path, there is nothing to save).
    """
    attempt = lease.attempt if lease is not None else 1
    journaling = await RunJournaling.open(options, run_id=run_id, attempt=attempt, emit=ctx.emit)
    if not checkpointed:
        journaling.recorder.stop_keeping()
    return journaling


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
    run_id = (resolved.run_id if resolved else None) or new_id()
    with claim_if(resolved):
        async with owning(ctx.run_store, run_id, ctx.emit) as lease:
            state, _, _ = await run_queue(
                team, queue, ctx=ctx, resolved=resolved, mode=mode, run_id=run_id, goal=goal,
                lease=lease,
            )  # fmt: skip
            result = team_result(run_id=run_id, attempt=_attempt(lease), queue=queue, state=state)
            await settle(lease, result)
    return result


def _attempt(lease: RunLeaseHandle | None) -> int:
    """A fresh run is attempt 1, or the run record's attempt when a run store owns it."""
    return lease.attempt if lease is not None else 1


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
        decisions=state.decisions,
    )
    outcome = await checkpointing.writer.save(snapshot, boundary="synthesis")
    if isinstance(outcome, Saved):
        state.revision = outcome.revision

"""``run_team``'s flow: decompose the goal, gate the plan, run it, synthesize (spec 14).

With a run store the lease is taken before the coordinator is asked anything, so a second
worker on the same run id does no model call at all; the plan suspension, every task boundary
and the synthesis are then fenced by that lease.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.agents.runner import resolve_agent
from oma_actors.domain.results import RunOutcome
from oma_actors.errors import TaskGraphError
from oma_actors.events import AgentCompleted
from oma_actors.ids import new_id
from oma_actors.orchestration.budget import after_synthesis, exhausted, task_charges
from oma_actors.orchestration.coordinator import (
    COORDINATOR_NAME,
    Decomposition,
    coordinator_results,
    decompose,
    default_coordinator,
    report_failure,
    synthesize,
    synthesizes_after,
)
from oma_actors.orchestration.decomposition import PlanProblem
from oma_actors.orchestration.flows import (
    claim_if,
    open_journaling,
    plan_view,
    run_queue,
    save_synthesis,
    team_memory,
)
from oma_actors.orchestration.journal_calls import ConversationJournal
from oma_actors.orchestration.journal_events import ends_on_raise, finish_journal, record_start
from oma_actors.orchestration.ownership import owning, settle
from oma_actors.orchestration.plan_gate import plan_gate
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.results import team_result
from oma_actors.orchestration.run import RunState
from oma_actors.orchestration.scheduler import DependencyFirst

if TYPE_CHECKING:
    from oma_actors.agents.config import AgentConfig, Team
    from oma_actors.agents.runner import ResolvedAgent
    from oma_actors.domain.results import AgentRunResult, TeamRunResult
    from oma_actors.orchestration.flows import FlowContext
    from oma_actors.orchestration.journaling import RunJournaling
    from oma_actors.orchestration.options import ResolvedCheckpoint
    from oma_actors.runs import RunLeaseHandle


async def run_goal(
    team: Team,
    goal: str,
    *,
    coordinator: AgentConfig | None,
    plan_only: bool,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint | None,
) -> TeamRunResult:
    """Decompose ``goal`` with the coordinator, run the plan, then synthesize.

    Spec 14: one repair attempt for an invalid plan (CD-02..CD-04), the plan gate before
    anything runs (AP-23), no synthesis for a suspended, rejected or halted run (CD-07).
    """
    planning_id = (resolved.run_id if resolved else None) or new_id()
    if resolved is not None and resolved.run_id is None:
        resolved = replace(resolved, run_id=planning_id)
    async with owning(ctx.run_store, planning_id, ctx.emit) as lease:
        result = await _owned_goal(
            team, goal, coordinator, plan_only, ctx, resolved, planning_id, lease
        )
        await settle(lease, result)
    return result


async def _owned_goal(
    team: Team,
    goal: str,
    coordinator: AgentConfig | None,
    plan_only: bool,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint | None,
    run_id: str,
    lease: RunLeaseHandle | None,
) -> TeamRunResult:
    journaling = None
    if ctx.journal is not None:
        # OMA's order: run/start, the coordinator's calls, then the plan (plan/set).
        journaling = await open_journaling(
            ctx.journal, ctx, run_id=run_id, lease=lease, checkpointed=resolved is not None
        )
        record_start(journaling, mode="runTeam", goal=goal)
    async with ends_on_raise(journaling):
        result = await _journaled_goal(
            team, goal, coordinator, plan_only, ctx, resolved, run_id, lease, journaling
        )
    if journaling is not None:
        await finish_journal(journaling, result.status)
    return result


async def _journaled_goal(
    team: Team,
    goal: str,
    coordinator: AgentConfig | None,
    plan_only: bool,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint | None,
    run_id: str,
    lease: RunLeaseHandle | None,
    journaling: RunJournaling | None,
) -> TeamRunResult:
    attempt = lease.attempt if lease is not None else 1
    lead = resolve_agent(coordinator or default_coordinator(team))
    plan = await decompose(lead, team, goal, run_id=run_id, journal=_calls(journaling, lead))
    planning = coordinator_results(plan.result)
    if ctx.budget is not None:
        # OMA charges the decomposition to the run first; over the budget, no task runs.
        ctx = replace(ctx, budget=ctx.budget.charged(plan.result.token_usage, lead.config.model))
        over = ctx.budget.check((), run_id=run_id) if ctx.budget is not None else None
        if over is not None:
            ctx.emit(over)
            return team_result(
                run_id=run_id, attempt=attempt, queue=TaskQueue([]), state=RunState(),
                extra_agent_results=planning, status=exhausted(over)[1],
            )  # fmt: skip
    queue = plan_queue(plan, ctx, run_id)
    if isinstance(queue, RunOutcome):
        return team_result(
            run_id=run_id, attempt=attempt, queue=TaskQueue([]), state=RunState(),
            extra_agent_results=planning, status=queue,
        )  # fmt: skip
    scheduler = DependencyFirst([agent.name for agent in team.agents])
    if ctx.on_plan_ready is not None or plan_only:
        # CD-05: the plan a reviewer sees, or a plan-only run returns, carries its assignees.
        scheduler.assign_up_front(queue)
    if ctx.on_plan_ready is not None:
        with claim_if(resolved):
            stopped = await plan_gate(
                ctx, queue, goal=goal, run_id=run_id, resolved=resolved, plan_only=plan_only,
                memory=team_memory(team), fence=lease, attempt=attempt,
                planning_usage=plan.result.token_usage,
            )  # fmt: skip
        if stopped is not None:
            # A suspended plan waits with its tasks; a refused or failed gate ran none and
            # lists none, as OMA returns ``tasks: []`` then.
            suspended = stopped.status is not None and stopped.status.code == "suspended"
            return team_result(
                run_id=run_id, attempt=attempt, state=stopped, extra_agent_results=planning,
                queue=plan_view(queue) if suspended else TaskQueue([]),
            )  # fmt: skip
    if plan_only:
        ctx.emit(
            AgentCompleted(run_id=run_id, agent=COORDINATOR_NAME, task_id=None, result=plan.result)
        )
        return team_result(
            run_id=run_id, attempt=attempt, queue=plan_view(queue), state=RunState(),
            extra_agent_results=planning, plan_only=True,
        )  # fmt: skip
    with claim_if(resolved):
        state, memory, checkpointing = await run_queue(
            team, queue, ctx=ctx, resolved=resolved, mode="runTeam", run_id=run_id, goal=goal,
            planning_usage=plan.result.token_usage, lease=lease, journaling=journaling,
            scheduler=scheduler,
        )  # fmt: skip
        if not synthesizes_after(state.status):
            # Suspended, aborted or over budget: nothing to synthesize (yet) (spec CD-07).
            return team_result(
                run_id=run_id, attempt=attempt, queue=queue, state=state,
                extra_agent_results=planning,
            )  # fmt: skip
        summary = await memory.summary() if memory is not None else ""
        synthesis = await synthesize(
            lead, goal, queue.tasks, summary, run_id=run_id, emit=ctx.emit,
            journal=_calls(journaling, lead),
        )  # fmt: skip
        final, status = charge_synthesis(
            team, queue, state, synthesis.result, lead.config.model, ctx, run_id
        )
        await save_synthesis(
            checkpointing, queue=queue, memory=memory, state=state, synthesis=final
        )
    # How the queue stopped (a rejection, a failed gate) stands over the synthesis's outcome.
    return team_result(
        run_id=run_id, attempt=attempt, queue=queue, state=state,
        extra_agent_results=coordinator_results(plan.result, final), status=state.status or status,
    )  # fmt: skip


def plan_queue(plan: Decomposition, ctx: FlowContext, run_id: str) -> TaskQueue | RunOutcome:
    """The decomposed plan as a queue, or the run's status when there is none (spec CD-03).

    The schema already refused unknown or ambiguous titles and cycles, so a graph the queue
    still refuses is OMA's ``loadSpecsIntoQueue`` failure, ``INVALID_TASK_DEPENDENCIES``.
    """
    if plan.tasks is not None:
        try:
            return TaskQueue.from_tasks(plan.tasks, clock=ctx.clock)
        except TaskGraphError as exc:
            message = f"Invalid task dependencies: {exc}"
            problem = PlanProblem("INVALID_TASK_DEPENDENCIES", (str(exc),), message)
            plan = replace(plan, tasks=None, problem=problem)
    return report_failure(plan, run_id=run_id, emit=ctx.emit)


def charge_synthesis(
    team: Team,
    queue: TaskQueue,
    state: RunState,
    synthesis: AgentRunResult,
    model: str,
    ctx: FlowContext,
    run_id: str,
) -> tuple[AgentRunResult, RunOutcome | None]:
    """Charge the synthesis to the run's budget, as OMA does after the tasks, and say how it
    decides the run's status (``None``: the tasks' outcome stands).

    Over the budget, ``BudgetExceeded`` is reported, the synthesis counts as failed and the run
    ends ``budget_exhausted`` (its answer is still returned, as OMA returns it). A synthesis that
    failed (its model call did) makes the run ``error``: OMA's ``buildTeamRunResult`` counts the
    coordinator's result with every other (spec TQ-07, CD-09), so the run is not ``ok``.
    """
    models = {agent.name: agent.model for agent in team.agents}
    # A task the estimator could not price was never charged (it failed instead): pricing it
    # again here would raise out of the run, where OMA's running total never sees it.
    charges = task_charges(state.charged_results(), lambda task: queue.get(task).assignee, models)
    over = after_synthesis(ctx.budget, charges, synthesis, model, run_id=run_id)
    if over is None:
        if not synthesis.success:
            return synthesis, RunOutcome("error", f"synthesis failed: {synthesis.output}")
        return synthesis, None
    ctx.emit(over)
    status = exhausted(over)[1]
    return replace(synthesis, success=False, status=status), status


def _calls(journaling: RunJournaling | None, lead: ResolvedAgent) -> ConversationJournal | None:
    """The journal of one coordinator conversation, under the coordinator's name."""
    return ConversationJournal(journaling, lead.config.name) if journaling is not None else None

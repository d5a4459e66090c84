"""``run_team``'s coordinator: decomposition with one repair attempt, and synthesis (spec 14)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from oma_actors.agents.config import AgentConfig, Team
from oma_actors.agents.loop import LoopContext, drive, prompted
from oma_actors.agents.runner import (
    Emit,
    ResolvedAgent,
    TaskOutcome,
    context_step,
    result_of,
    run_task,
)
from oma_actors.agents.turn import initial_state, with_user_message
from oma_actors.domain.messages import ChatOptions
from oma_actors.domain.results import AgentRunResult, RunOutcome
from oma_actors.events import AgentCompleted, CoordinatorFailed
from oma_actors.orchestration.decomposition import PLAN_INVALID, PlanProblem, parse_task_list
from oma_actors.orchestration.prompts import decomposition_prompt, repair_prompt, synthesis_prompt

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.tasks import Task, TaskState
    from oma_actors.orchestration.journal_calls import ConversationJournal

COORDINATOR_NAME = "coordinator"
COORDINATOR_SYSTEM_PROMPT = (
    "You are the coordinator of a team of agents. You plan work as precise JSON task lists and "
    "write final answers from the team's results."
)


_NO_SYNTHESIS_AFTER = frozenset({"suspended", "aborted", "budget_exhausted"})


def synthesizes_after(status: RunOutcome | None) -> bool:
    """Whether the coordinator synthesizes once the queue stopped with ``status`` (spec CD-07).

    Always after the queue finishes, a rejected dispatch or a failed dispatch gate included (OMA
    returns early from ``runTeam`` only for a suspension); never while the run waits for an
    approval, after an abort, or with the budget already exceeded.
    """
    return status is None or status.code not in _NO_SYNTHESIS_AFTER


def default_coordinator(team: Team) -> AgentConfig:
    """A coordinator on the first agent's model (max 3 turns, no tools) (spec CD-02)."""
    first = team.agents[0]
    return AgentConfig(
        COORDINATOR_NAME,
        model=first.model,
        provider=first.provider,
        adapter=first.adapter,
        base_url=first.base_url,
        api_key=first.api_key,
        system_prompt=COORDINATOR_SYSTEM_PROMPT,
        max_turns=3,
    )


def coordinator_results(
    planning: AgentRunResult | None, synthesis: AgentRunResult | None = None
) -> dict[str, AgentRunResult]:
    """The coordinator's entry of ``agent_results``.

    Fresh, the synthesis is the coordinator's visible result, with the decomposition's tokens
    added: both are charged to the run. Before a synthesis (a halted, suspended or plan-only
    run) the decomposition stands alone. A restore holds no decomposition (``planning`` is
    ``None``, as OMA's restore has no ``coordinator:decompose`` result): the synthesis alone, or
    no entry (its decomposition's tokens still count in ``TeamRunResult.token_usage``).
    """
    if synthesis is None:
        return {} if planning is None else {COORDINATOR_NAME: planning}
    if planning is None:
        return {COORDINATOR_NAME: synthesis}
    usage = synthesis.token_usage + planning.token_usage
    return {COORDINATOR_NAME: replace(synthesis, token_usage=usage)}


PLAN_INVALID_MESSAGE = "Coordinator plan failed structured validation after repair."


@dataclass(frozen=True, slots=True, kw_only=True)
class Decomposition:
    """The coordinator's plan, or why there is none; ``result`` is the coordinator's turn.

    Nothing is reported yet: the caller charges ``result`` to the run's budget first and
    reports a failure only within it (``report_failure``), in OMA's order.
    """

    tasks: list[Task] | None
    problem: PlanProblem | None
    result: AgentRunResult


async def decompose(
    coordinator: ResolvedAgent,
    team: Team,
    goal: str,
    *,
    run_id: str,
    journal: ConversationJournal | None = None,
) -> Decomposition:
    """Ask for a task list, validate it, and ask once more with OMA's feedback if it is invalid.

    ``journal`` records the calls (the repair request included) under the coordinator's name.
    """
    try:
        return await _decompose(coordinator, team, goal, run_id=run_id, journal=journal)
    finally:
        if journal is not None:
            journal.close()


async def _decompose(
    coordinator: ResolvedAgent,
    team: Team,
    goal: str,
    *,
    run_id: str,
    journal: ConversationJournal | None,
) -> Decomposition:
    config = coordinator.config
    options = ChatOptions(model=config.model, system_prompt=config.system_prompt)
    ctx = LoopContext(
        agent_name=config.name,
        adapter=coordinator.adapter,
        options=options,
        context=context_step(config, coordinator.adapter, options),
        tools={},
        max_turns=config.max_turns,
        run_id=run_id,
        on_boundary=journal.boundary if journal is not None else None,
        on_request=journal.request if journal is not None else None,
    )
    roster = [agent.name for agent in team.agents]
    opened = initial_state(decomposition_prompt(goal, team.agents))
    state = await drive(opened, ctx, prompted(opened))
    if not state.success:
        return _failed(state)
    parsed = parse_task_list(state.final_output, roster)
    if isinstance(parsed, PlanProblem):
        # OMA's repair is a run of its own (``backend.run``): the prompt, the first run's
        # messages and the feedback, with a fresh ``maxTurns``; its usage adds to the first's.
        # The state carries on, so the journal numbers its turns after the first run's.
        transcript = replace(state, conversation=(opened.conversation[0], *state.messages))
        repair = with_user_message(transcript, repair_prompt(parsed.message))
        own_turns = replace(ctx, max_turns=state.turns + config.max_turns)
        state = await drive(repair, own_turns, prompted(repair))
        if not state.success:
            return _failed(state)
        parsed = parse_task_list(state.final_output, roster)
    result = result_of(state, state.token_usage)
    if isinstance(parsed, PlanProblem):
        problem = PlanProblem(PLAN_INVALID, parsed.errors, PLAN_INVALID_MESSAGE)
        return Decomposition(tasks=None, problem=problem, result=result)
    return Decomposition(tasks=parsed, problem=None, result=result)


def _failed(state: RunnerState) -> Decomposition:
    """A coordinator run that failed (its model call did): OMA's decomposition failure."""
    output = state.final_output
    problem = PlanProblem("COORDINATOR_DECOMPOSITION_FAILED", (output,), output)
    return Decomposition(tasks=None, problem=problem, result=result_of(state, state.token_usage))


def report_failure(decomposition: Decomposition, *, run_id: str, emit: Emit) -> RunOutcome:
    """Report a decomposition without a plan as OMA does, and give the run's status.

    The coordinator's ``agent_complete`` (its result), then the error with OMA's code
    (``orchestrator.ts``, ``runTeam`` step 2). The status keeps the code before OMA's message,
    as no other field of the result carries it.
    """
    problem = decomposition.problem
    assert problem is not None
    result = decomposition.result
    emit(AgentCompleted(run_id=run_id, agent=COORDINATOR_NAME, task_id=None, result=result))
    emit(CoordinatorFailed(run_id=run_id, code=problem.code, message=problem.message))
    return RunOutcome("error", f"{problem.code}: {problem.message}")


async def synthesize(
    coordinator: ResolvedAgent,
    goal: str,
    tasks: Sequence[TaskState],
    memory_summary: str,
    *,
    run_id: str,
    emit: Emit,
    journal: ConversationJournal | None = None,
) -> TaskOutcome:
    """Ask the coordinator for the final answer from the finished tasks (spec CD-07).

    ``journal`` records the call under the coordinator's name.
    """
    prompt = synthesis_prompt(goal, tasks, memory_summary)
    try:
        outcome = await run_task(
            coordinator, None, prompt, run_id=run_id, emit=emit,
            on_boundary=journal.boundary if journal is not None else None,
            on_request=journal.request if journal is not None else None,
        )  # fmt: skip
    finally:
        if journal is not None:
            journal.close()
    emit(AgentCompleted(run_id=run_id, agent=COORDINATOR_NAME, task_id=None, result=outcome.result))
    return outcome

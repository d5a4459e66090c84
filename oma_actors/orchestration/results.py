"""Building the caller-facing ``TeamRunResult`` from a finished queue (spec TQ-07)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.domain.messages import TokenUsage
from oma_actors.domain.results import AgentRunResult, RunOutcome, TeamRunResult

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.run import RunState


def run_status(queue: TaskQueue, results: Mapping[str, AgentRunResult] | None = None) -> RunOutcome:
    """``ok`` iff no task failed and none is left unfinished; skipped tasks alone do not fail.

    Spec TQ-07 (OMA's ``buildTeamRunResult``): a task result whose status is
    ``budget_exhausted`` (its agent's token budget ran out) is the run's status, the first one
    in the order the tasks finished; a task recovered by a plan revision does not count.
    """
    recovered = {task.id for task in queue.tasks if task.recovered_by_revision is not None}
    for task_id, result in (results or {}).items():
        status = result.status
        if status is not None and status.code == "budget_exhausted" and task_id not in recovered:
            return status
    failed = queue.failures()  # a failure recovered by a plan revision does not count
    if failed:
        names = ", ".join(repr(task.title) for task in failed)
        return RunOutcome("error", f"{len(failed)} task(s) failed: {names}")
    unfinished = [task for task in queue.tasks if not task.is_terminal]
    if unfinished:
        return RunOutcome("error", f"{len(unfinished)} task(s) did not finish")
    return RunOutcome("ok")


OUTPUT_SEPARATOR = "\n\n---\n\n"
"""What joins an agent's outputs in its merged ``agent_results`` entry (OMA's separator)."""

UNKNOWN_AGENT = "unknown"
"""The agent a result is filed under when neither it nor its task names one (spec OR-09)."""


def merge_agent_results(existing: AgentRunResult, result: AgentRunResult) -> AgentRunResult:
    """One agent's ``agent_results`` entry once ``result`` joins the ``existing`` one.

    OMA's ``buildTeamRunResult`` (orchestrator.ts 3283-3302): the non-empty outputs joined by
    ``OUTPUT_SEPARATOR``, messages and tool calls concatenated, usage summed, successful only if
    both were; a failed merge takes the later part's status (``result.status ??
    existing.status``, where every result OMA's agent makes carries one: a later part that
    succeeded makes the merge ``ok``, one that failed plainly makes it ``error``, whatever the
    earlier part said). Like OMA's, the merge keeps nothing else: ``confirmation_required`` is
    not carried. ``turns`` (not in OMA's result) is summed.
    """
    success = existing.success and result.success
    status = result.status
    if not success and status is None and result.success:
        status = RunOutcome("ok")  # OMA's ``statusOnly('ok')``; ``None`` would read as error
    return AgentRunResult(
        success=success,
        output=OUTPUT_SEPARATOR.join(text for text in (existing.output, result.output) if text),
        messages=[*existing.messages, *result.messages],
        token_usage=existing.token_usage + result.token_usage,
        tool_calls=[*existing.tool_calls, *result.tool_calls],
        turns=existing.turns + result.turns,
        status=None if success else status,
    )


def collapse_agent_results(
    entries: Iterable[tuple[str, AgentRunResult]],
) -> dict[str, AgentRunResult]:
    """``agent_results`` from ``(agent, result)`` pairs in the order the results came.

    An agent's first result stands alone; each further one is merged into it.
    """
    collapsed: dict[str, AgentRunResult] = {}
    for agent, result in entries:
        existing = collapsed.get(agent)
        collapsed[agent] = result if existing is None else merge_agent_results(existing, result)
    return collapsed


def team_result(
    *,
    run_id: str,
    attempt: int,
    queue: TaskQueue,
    state: RunState,
    extra_agent_results: Mapping[str, AgentRunResult] | None = None,
    status: RunOutcome | None = None,
    plan_only: bool = False,
    carried_usage: TokenUsage | None = None,
) -> TeamRunResult:
    """Assemble the run result.

    ``agent_results`` collapses every task result by its agent, then ``extra_agent_results``
    (the coordinator's entry) by name, in that order, as OMA collapses its per-task map.
    Token usage sums every task result, every extra result and ``carried_usage``: tokens the
    run spent that no entry carries (a restored run's decomposition, whose result OMA's
    restore never holds, but which stays charged to the run's budget here).
    """
    extras = extra_agent_results or {}
    assignees = {task.id: task.assignee for task in queue.tasks}
    agent_results = collapse_agent_results(
        [
            (
                state.result_agents.get(task_id) or assignees.get(task_id) or UNKNOWN_AGENT,
                result,
            )
            for task_id, result in state.task_results.items()
        ]
        + list(extras.items())
    )
    usage = carried_usage or TokenUsage()
    for result in state.task_results.values():
        usage = usage + result.token_usage
    for result in extras.values():
        usage = usage + result.token_usage
    # A plan-only result is a finished answer: the plan itself (spec CD-06).
    final = (
        status
        or state.status
        or (RunOutcome("ok") if plan_only else run_status(queue, state.task_results))
    )
    saves, failures = (state.writer.saved, state.writer.failed) if state.writer else (0, 0)
    if failures and final.code == "ok":
        final = RunOutcome("ok", _durability_note(saves, failures, state.revision))
    return TeamRunResult(
        success=final.code == "ok",
        status=final,
        run_id=run_id,
        attempt=attempt,
        tasks=queue.tasks,
        task_results=dict(state.task_results),
        agent_results=agent_results,
        token_usage=usage,
        pending_approvals=list(state.pending_approvals),
        approval_decisions=list(state.decisions),
        plan_only=plan_only,
        checkpoint_saves=saves,
        checkpoint_save_failures=failures,
    )


def _durability_note(saves: int, failures: int, revision: int) -> str:
    """What a restore would find when some of the run's saves failed (issue: silent ``ok``)."""
    if saves == 0:
        return (
            f"completed, but nothing durable was saved: all {failures} checkpoint saves failed; "
            "a restore would start over"
        )
    return (
        f"completed, but {failures} of {saves + failures} checkpoint saves failed; a restore "
        f"continues from revision {revision}"
    )

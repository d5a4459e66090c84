"""Building the caller-facing ``TeamRunResult`` from a finished queue (spec TQ-07)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.domain.messages import TokenUsage
from oma_actors.domain.results import AgentRunResult, RunOutcome, TeamRunResult

if TYPE_CHECKING:
    from collections.abc import Mapping

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


def team_result(
    *,
    run_id: str,
    attempt: int,
    queue: TaskQueue,
    state: RunState,
    extra_agent_results: Mapping[str, AgentRunResult] | None = None,
    status: RunOutcome | None = None,
    plan_only: bool = False,
) -> TeamRunResult:
    """Assemble the run result; token usage sums every task result and extra results."""
    agent_results = {**state.agent_results, **(extra_agent_results or {})}
    usage = TokenUsage()
    for result in state.task_results.values():
        usage = usage + result.token_usage
    for result in (extra_agent_results or {}).values():
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

"""``on_plan_ready``: review the decomposed plan before anything runs (spec AP-04, AP-23)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.approvals import (
    PLAN_BOUNDARY,
    DurableApprovalLedger,
    create_approval_request,
    plan_content,
)
from oma_actors.approvals.gates import Allow, Deny, GateFailed, Suspend, consult
from oma_actors.checkpoint.run_writer import Saved
from oma_actors.domain.jsonforms import task_to_json
from oma_actors.domain.results import RunOutcome
from oma_actors.events import ApprovalPending
from oma_actors.orchestration.checkpointing import build_snapshot, new_checkpointing
from oma_actors.orchestration.run import RunState
from oma_actors.stores.base import is_atomic_store

if TYPE_CHECKING:
    from oma_actors.checkpoint.run_writer import Fence
    from oma_actors.domain.messages import TokenUsage
    from oma_actors.orchestration.flows import FlowContext
    from oma_actors.orchestration.options import ResolvedCheckpoint
    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.shared_memory import SharedMemory


async def plan_gate(
    ctx: FlowContext,
    queue: TaskQueue,
    *,
    goal: str,
    run_id: str,
    resolved: ResolvedCheckpoint | None,
    plan_only: bool,
    memory: SharedMemory | None,
    fence: Fence | None = None,
    attempt: int = 1,
    planning_usage: TokenUsage | None = None,
) -> RunState | None:
    """Ask ``on_plan_ready``; ``None`` lets the plan run, a ``RunState`` is how the run ended.

    A suspension is reported only after the plan is durably saved and its ledger row exists.
    ``planning_usage``: the decomposition's tokens, saved with the plan so that the approved
    run's restore keeps them charged and reported, as every later snapshot of the run does.
    """
    assert ctx.on_plan_ready is not None
    verdict = await consult(ctx.on_plan_ready, queue.tasks)
    match verdict:
        case Allow():
            return None
        case GateFailed(error=error):
            # A gate that raised is the callback's failure, not a reviewer's refusal: OMA
            # classifies it as ``error`` (``classifyRunFailure(..., {kind: 'callback'})``).
            return RunState(status=RunOutcome("error", f"Plan approval callback failed: {error}"))
        case Deny():
            # OMA's text, whatever the reason: its result keeps no deny reason of a plan gate
            # (orchestrator.ts returns statusOnly('rejected', 'Plan approval rejected.')).
            return RunState(status=RunOutcome("rejected", "Plan approval rejected."))
        case Suspend(reason=reason):
            pass
    if resolved is None or not is_atomic_store(resolved.store):
        return RunState(
            status=RunOutcome(
                "error",
                "APPROVAL_ATOMIC_STORE_REQUIRED: plan suspension needs a checkpoint store with "
                "compare_and_set",
            )
        )
    content = plan_content(
        [task_to_json(task) for task in queue.tasks], "plan_only" if plan_only else "execute"
    )
    request = create_approval_request(
        run_id=run_id, scope="plan", boundary=PLAN_BOUNDARY, content=content, reason=reason
    )
    checkpointing = new_checkpointing(
        resolved,
        run_id=run_id,
        mode="runTeam",
        goal=goal,
        emit=ctx.emit,
        clock=ctx.clock,
        fence=fence,
        attempt=attempt,
        planning_usage=planning_usage,
    )
    snapshot = await build_snapshot(
        checkpointing,
        queue=queue,
        memory=memory,
        results={},
        in_flight={},
        pending_approvals=[request],
    )
    outcome = await checkpointing.writer.save(snapshot, boundary="plan_suspended")
    if not isinstance(outcome, Saved):
        # Strict: a suspension is never reported without durable state.
        message = (
            f"APPROVAL_INTEGRITY_ERROR: the plan suspension could not be saved: {outcome.error}"
        )
        return RunState(status=RunOutcome("error", message))
    await DurableApprovalLedger(resolved.store).ensure_request(request)  # type: ignore[arg-type]
    ctx.emit(ApprovalPending(run_id=run_id, request=request))
    return RunState(
        status=RunOutcome("suspended", "Plan approval pending."),
        pending_approvals=[request],
        revision=outcome.revision,
    )

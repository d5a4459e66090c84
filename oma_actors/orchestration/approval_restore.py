"""Restore-time reconciliation of durable approvals (spec AP-28..AP-31).

Every decision the checkpoint claims must match the primary ledger; every pending request's
content is recomputed from the checkpoint and must hash to what the reviewer saw. Only then may
an approved boundary continue, and then exactly the reviewed work.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from oma_actors.approvals import (
    PLAN_BOUNDARY,
    DurableApprovalLedger,
    dispatch_content,
    hash_approval_request,
    plan_content,
    tool_call_boundary,
)
from oma_actors.errors import DurableApprovalError

if TYPE_CHECKING:
    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.snapshot import CheckpointSnapshot

INTEGRITY = "APPROVAL_INTEGRITY_ERROR"
STALE = "APPROVAL_STALE_DECISION"


@dataclass(slots=True, kw_only=True)
class Reconciled:
    """What the ledger says about a snapshot's approvals, checked against the checkpoint.

    Attributes:
        unresolved: requests still waiting for a decision.
        rejected: non-tool requests rejected since the snapshot was written.
        already_rejected: the snapshot already recorded a rejected non-tool decision.
        approved_dispatch: task id -> approved dispatch request, consumed once at dispatch.
        plan_only: an approved plan whose continuation is ``plan_only``.
        decisions: every decision known to the run.
        resume: in-flight runner states with tool decisions attached to their pending calls.
    """

    unresolved: list[ApprovalRequest] = field(default_factory=list)
    rejected: list[ApprovalRequest] = field(default_factory=list)
    already_rejected: bool = False
    approved_dispatch: dict[str, ApprovalRequest] = field(default_factory=dict)
    plan_only: bool = False
    decisions: list[ApprovalDecision] = field(default_factory=list)
    resume: dict[str, tuple[str, RunnerState]] = field(default_factory=dict)


def _same(a: ApprovalDecision, b: ApprovalDecision) -> bool:
    return (
        a.request_id == b.request_id
        and a.run_id == b.run_id
        and a.scope == b.scope
        and a.request_hash == b.request_hash
        and a.decision == b.decision
        and a.reviewer == b.reviewer
        and a.decided_at == b.decided_at
    )


def _task_json(snapshot: CheckpointSnapshot, task_id: str) -> dict[str, Any] | None:
    for raw in snapshot.raw.get("queue", {}).get("tasks", []):
        if isinstance(raw, dict) and raw.get("id") == task_id:
            return raw
    return None


def _recomputed_hash(
    snapshot: CheckpointSnapshot,
    request: ApprovalRequest,
    resume: dict[str, tuple[str, RunnerState]],
) -> str:
    """The hash of ``request``'s content as the checkpoint says it is now (spec AP-30)."""
    content = request.content
    if request.scope == "plan":
        if request.boundary != PLAN_BOUNDARY:
            raise DurableApprovalError(
                INTEGRITY, f"plan request {request.id} has a foreign boundary"
            )
        tasks = [t for t in snapshot.raw.get("queue", {}).get("tasks", []) if isinstance(t, dict)]
        recomputed = plan_content(tasks, content.get("continuation", "execute"))
    elif request.scope == "task_dispatch":
        task = _task_json(snapshot, request.boundary)
        if task is None:
            raise DurableApprovalError(
                STALE, f"request {request.id} no longer identifies a pending task"
            )
        recomputed = dispatch_content(task)
    elif request.scope == "tool_call":
        task_id, call_id = str(content.get("taskId", "")), str(content.get("toolCallId", ""))
        entry = resume.get(task_id)
        match = None
        if entry is not None:
            assignee, state = entry
            for item in state.pending:
                if (
                    item.call.id == call_id
                    and item.commit is None
                    and item.approval_request is not None
                    and item.approval_request.id == request.id
                    and assignee == content.get("agentName")
                    and item.call.name == content.get("toolName")
                ):
                    match = item
        if match is None or request.boundary != tool_call_boundary(task_id, call_id):
            raise DurableApprovalError(
                STALE, f"request {request.id} no longer identifies the pending invocation"
            )
        recomputed = {**content, "rawInput": dict(match.call.input)}
    else:
        raise DurableApprovalError(INTEGRITY, f"request {request.id} has scope {request.scope!r}")
    return hash_approval_request(request.scope, request.boundary, recomputed)


async def reconcile_approvals(
    snapshot: CheckpointSnapshot,
    ledger: DurableApprovalLedger | None,
    run_id: str,
    resume: dict[str, tuple[str, RunnerState]],
) -> Reconciled:
    """Check the snapshot's approvals against the ledger and attach decisions (AP-28, AP-29).

    Raises:
        DurableApprovalError: ``APPROVAL_ATOMIC_STORE_REQUIRED`` when approvals exist but the
            store cannot hold a ledger; ``APPROVAL_INTEGRITY_ERROR`` on any disagreement
            between checkpoint and ledger or tampered content; ``APPROVAL_STALE_DECISION`` when
            a request no longer identifies its boundary.
    """
    result = Reconciled(resume=dict(resume), decisions=list(snapshot.approval_decisions))
    if not snapshot.pending_approvals and not snapshot.approval_decisions:
        return result
    if ledger is None:
        raise DurableApprovalError(
            "APPROVAL_ATOMIC_STORE_REQUIRED",
            "the checkpoint holds durable approvals but its store has no compare_and_set",
        )
    for decision in snapshot.approval_decisions:
        record = await ledger.get(decision.request_id)
        if record is None or record.decision is None or not _same(record.decision, decision):
            raise DurableApprovalError(
                INTEGRITY, f"decision for {decision.request_id} does not match the primary ledger"
            )
        if decision.decision == "rejected" and decision.scope != "tool_call":
            result.already_rejected = True
    known = {decision.request_id for decision in result.decisions}
    for request in snapshot.pending_approvals:
        if request.run_id != run_id:
            raise DurableApprovalError(
                INTEGRITY, f"request {request.id} belongs to another logical run"
            )
        if _recomputed_hash(snapshot, request, result.resume) != request.request_hash:
            raise DurableApprovalError(
                STALE, f"request {request.id} differs from the checkpointed content"
            )
        record = await ledger.ensure_request(request)
        found = record.decision
        if found is None:
            result.unresolved.append(request)
            continue
        if found.request_id not in known:
            result.decisions.append(found)
            known.add(found.request_id)
        if request.scope == "tool_call":
            _attach(result.resume, request, found)
        elif found.decision == "rejected":
            result.rejected.append(request)
        elif request.scope == "task_dispatch":
            result.approved_dispatch[request.boundary] = request
        elif request.scope == "plan" and request.content.get("continuation") == "plan_only":
            result.plan_only = True
    return result


def _attach(
    resume: dict[str, tuple[str, RunnerState]], request: ApprovalRequest, decision: ApprovalDecision
) -> None:
    task_id = str(request.content.get("taskId", ""))
    assignee, state = resume[task_id]
    pending = tuple(
        replace(item, approval_decision=decision)
        if item.approval_request is not None and item.approval_request.id == request.id
        else item
        for item in state.pending
    )
    resume[task_id] = (assignee, replace(state, pending=pending))

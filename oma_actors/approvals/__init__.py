"""Durable approvals: canonical request hashes and the compare-and-set ledger (spec AP).

A gate that answers ``Suspend`` turns a boundary into an ``ApprovalRequest`` whose hash binds the
exact content a reviewer sees; the ``DurableApprovalLedger`` keeps one row per request in an
atomic store, and the first decision recorded there wins::

    request = create_approval_request(
        run_id="run-1", scope="task_dispatch", boundary=dispatch_boundary(task),
        content=dispatch_content(task),
    )
    await DurableApprovalLedger(store).ensure_request(request)
    ...  # later, possibly in another process:
    await decide_approval(store, request_id=request.id, request_hash=request.request_hash,
                          decision="approve", reviewer=Reviewer("alice"))
"""

from oma_actors.approvals.canonical import (
    APPROVAL_KEY_PREFIX,
    approval_hash_input,
    approval_key,
    approval_request_id,
    hash_approval_request,
    stable_json,
)
from oma_actors.approvals.content import (
    PLAN_BOUNDARY,
    content_boundary,
    create_approval_request,
    dispatch_boundary,
    dispatch_content,
    plan_content,
    round_boundary,
    round_content,
    tool_call_boundary,
    tool_call_content,
)
from oma_actors.approvals.gates import Allow, Deny, Gate, Suspend, ToolCallRequest
from oma_actors.approvals.ledger import (
    DurableApprovalLedger,
    decide_approval,
    get_approval_record,
    require_atomic_store,
)
from oma_actors.approvals.records import (
    ApprovalRecord,
    check_reviewer,
    decision_from_json,
    decision_to_json,
    request_from_json,
    request_to_json,
)
from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest, Reviewer

__all__ = [
    "APPROVAL_KEY_PREFIX",
    "Allow",
    "ApprovalDecision",
    "ApprovalRecord",
    "ApprovalRequest",
    "Deny",
    "DurableApprovalLedger",
    "Gate",
    "PLAN_BOUNDARY",
    "Reviewer",
    "Suspend",
    "ToolCallRequest",
    "approval_hash_input",
    "approval_key",
    "approval_request_id",
    "check_reviewer",
    "content_boundary",
    "create_approval_request",
    "decide_approval",
    "decision_from_json",
    "decision_to_json",
    "dispatch_boundary",
    "dispatch_content",
    "get_approval_record",
    "hash_approval_request",
    "plan_content",
    "request_from_json",
    "request_to_json",
    "require_atomic_store",
    "round_boundary",
    "round_content",
    "stable_json",
    "tool_call_boundary",
    "tool_call_content",
]

"""Two guards of ``approvals.canonical`` no other test held (mutation sweep, sweep-approvals).

* ``hash_approval_edit`` hashes the request hash together with the edited input (decision D17):
  an approved edit moved onto another request (its ``requestId`` and ``requestHash`` rewritten,
  its ``editHash`` kept) must not verify, or one reviewer's edit would approve another call.
* ``stable_json`` forgets an object once it is written (``_write_object`` discards it from the
  containers on the current path): the same dict referenced twice is shared, not a cycle.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from oma_actors.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    Reviewer,
    create_approval_request,
    decision_from_json,
    decision_to_json,
    hash_approval_request,
    stable_json,
    tool_call_boundary,
    tool_call_content,
)
from oma_actors.errors import DurableApprovalError

RUN = "run-edit-guard"
DECIDED_AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def charge_request(call_id: str, amount: int) -> ApprovalRequest:
    """A pending ``charge_card`` call of task ``t1`` for ``amount``."""
    content = tool_call_content(
        tool_name="charge_card",
        raw_input={"amount": amount},
        input={"amount": amount},
        agent_name="worker",
        task_id="t1",
        tool_call_id=call_id,
    )
    return create_approval_request(
        run_id=RUN, scope="tool_call", boundary=tool_call_boundary("t1", call_id), content=content
    )


def approved_with_edit(request: ApprovalRequest, edit: dict[str, Any]) -> ApprovalDecision:
    return ApprovalDecision(
        request_id=request.id,
        run_id=request.run_id,
        scope=request.scope,
        request_hash=request.request_hash,
        decision="approved",
        reviewer=Reviewer("alice"),
        decided_at=DECIDED_AT,
        edited_input=edit,
    )


def test_an_approved_edit_moved_onto_another_request_is_refused() -> None:
    """Guard: ``hash_approval_edit`` binds ``requestHash`` into the ``editHash``."""
    reviewed, other = charge_request("call-1", 7), charge_request("call-2", 9000)
    edit = {"amount": 5}
    moved = decision_to_json(approved_with_edit(reviewed, edit))
    moved["requestId"], moved["requestHash"] = other.id, other.request_hash
    with pytest.raises(DurableApprovalError, match="does not match its editHash") as caught:
        decision_from_json(moved, request=other)
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"
    # The same edit, decided on the other request itself, is accepted: only the move is refused.
    own = decision_from_json(decision_to_json(approved_with_edit(other, edit)), request=other)
    assert own.edited_input == edit


def test_a_dict_shared_by_two_members_is_not_a_cycle() -> None:
    """Guard: ``_write_object`` discards a written object from the active path."""
    shared = {"priority": 1}
    value = {"a": shared, "b": [shared, {"c": shared}]}
    expected = '{"a":{"priority":1},"b":[{"priority":1},{"c":{"priority":1}}]}'
    assert stable_json(value) == expected
    # A request over content that shares a dict hashes as its unshared copy does.
    unshared = {"a": {"priority": 1}, "b": [{"priority": 1}, {"c": {"priority": 1}}]}
    assert hash_approval_request("plan", "b", value) == hash_approval_request("plan", "b", unshared)

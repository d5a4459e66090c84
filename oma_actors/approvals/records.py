"""Ledger rows as OMA JSON: requests, decisions and records, and their validation (AP-11..AP-15).

Pure functions only. A request read back is fully re-verified: its hash is recomputed from its
content and its id from its hash, so an edit to any hashed field of a stored row is detected.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from oma_actors.approvals.canonical import (
    VALIDATION,
    approval_request_id,
    hash_approval_edit,
    hash_approval_request,
    js_trim,
    ordered_json,
    stable_json,
)
from oma_actors.approvals.content import SCOPES, content_problem
from oma_actors.clock import from_iso, to_iso
from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest, ApprovalScope, Reviewer
from oma_actors.errors import DurableApprovalError, sealed_note
from oma_actors.jsontext import reject_constant
from oma_actors.readable import shorten

if TYPE_CHECKING:
    from datetime import datetime

INTEGRITY = "APPROVAL_INTEGRITY_ERROR"
_REQUEST_ID = re.compile(r"apr_[0-9a-f]{32}")
_HASH = re.compile(r"[0-9a-f]{64}")


def request_to_json(request: ApprovalRequest) -> dict[str, Any]:
    """The OMA JSON of a request: ``{version: 1, id, runId, scope, boundary, requestHash, ...}``.

    ``reason`` is omitted when it is ``None``; ``requestedAt`` is a ``toISOString`` timestamp.
    """
    out: dict[str, Any] = {
        "version": 1,
        "id": request.id,
        "runId": request.run_id,
        "scope": request.scope,
        "boundary": request.boundary,
        "requestHash": request.request_hash,
        "requestedAt": to_iso(request.requested_at),
    }
    if request.reason is not None:
        out["reason"] = request.reason
    out["content"] = request.content
    return out


def request_from_json(raw: object) -> ApprovalRequest:
    """Parse and fully verify a request (AP-14), including its recomputed hash and id.

    Raises:
        DurableApprovalError: ``APPROVAL_INTEGRITY_ERROR`` naming the first problem.
    """
    if not isinstance(raw, dict):
        raise _integrity("approval request must be an object")
    request_id = raw.get("id")
    if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
        raise _integrity(
            shorten(f"approval request id {request_id!r} is not apr_<32 hex digits>", 200)
        )
    where = f"approval request {request_id}"
    if not _is_one(raw.get("version")):
        raise _integrity(shorten(f"{where} has unsupported version {raw.get('version')!r}", 200))
    run_id, scope, boundary = raw.get("runId"), raw.get("scope"), raw.get("boundary")
    request_hash, reason = raw.get("requestHash"), raw.get("reason")
    # OMA writes both trimmed by JavaScript's trim(): "r\x1c" is such a run id (js_trim).
    if not isinstance(run_id, str) or not run_id or run_id != js_trim(run_id):
        raise _integrity(f"{where} has no valid runId")
    if scope not in SCOPES:
        raise _integrity(shorten(f"{where} has unknown scope {scope!r}", 200))
    if not isinstance(boundary, str) or not boundary or boundary != js_trim(boundary):
        raise _integrity(f"{where} has no valid boundary")
    if not isinstance(request_hash, str) or not _HASH.fullmatch(request_hash):
        raise _integrity(f"{where} has a requestHash that is not 64 hex digits")
    if "reason" in raw and not isinstance(reason, str):
        raise _integrity(f"{where} has a reason that is not a string")
    requested_at = _moment(raw.get("requestedAt"), f"{where} requestedAt")
    content = raw.get("content")
    problem = content_problem(content)
    if problem is not None:
        raise _integrity(f"{where} has invalid content: {problem}")
    assert isinstance(content, dict)
    if content.get("kind") != scope:
        raise _integrity(f"{where} scope {scope!r} does not match content kind")
    try:
        plain: dict[str, Any] = json.loads(stable_json(content))
    except DurableApprovalError as exc:
        raise _integrity(f"{where} content is not canonical JSON ({exc})") from None
    if hash_approval_request(cast("str", scope), boundary, plain) != request_hash:
        raise _integrity(f"{where} content does not match its requestHash")
    if approval_request_id(run_id, cast("str", scope), boundary, request_hash) != request_id:
        raise _integrity(f"{where} id does not match its run, scope, boundary and hash")
    return ApprovalRequest(
        id=request_id,
        run_id=run_id,
        scope=cast("ApprovalScope", scope),
        boundary=boundary,
        request_hash=request_hash,
        requested_at=requested_at,
        reason=reason,
        content=plain,
    )


def decision_to_json(decision: ApprovalDecision) -> dict[str, Any]:
    """The OMA JSON of a decision: ``{version: 1, requestId, ..., reviewer, decidedAt}``.

    An approval with an edited input adds ``editedInput`` and its ``editHash`` (D17).
    """
    reviewer: dict[str, Any] = {"id": decision.reviewer.id}
    if decision.reviewer.display_name is not None:
        reviewer["displayName"] = decision.reviewer.display_name
    out: dict[str, Any] = {
        "version": 1,
        "requestId": decision.request_id,
        "runId": decision.run_id,
        "scope": decision.scope,
        "requestHash": decision.request_hash,
        "decision": decision.decision,
        "reviewer": reviewer,
        "decidedAt": to_iso(decision.decided_at),
    }
    if decision.edited_input is not None:
        # Only an edited approval has these members: every other row stays OMA's, byte for byte.
        out["editedInput"] = decision.edited_input
        out["editHash"] = hash_approval_edit(decision.request_hash, decision.edited_input)
    return out


def decision_from_json(raw: object, *, request: ApprovalRequest | None = None) -> ApprovalDecision:
    """Parse and verify a decision (AP-15), and its binding to ``request`` when one is given.

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` for a bad reviewer;
            ``APPROVAL_INTEGRITY_ERROR`` for anything else, including a decision whose
            requestId, runId, scope or requestHash differs from ``request``'s.
    """
    if not isinstance(raw, dict):
        raise _integrity("approval decision must be an object")
    request_id, run_id = raw.get("requestId"), raw.get("runId")
    scope, request_hash, value = raw.get("scope"), raw.get("requestHash"), raw.get("decision")
    if not _is_one(raw.get("version")):
        raise _integrity(
            shorten(f"approval decision has unsupported version {raw.get('version')!r}", 200)
        )
    if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
        raise _integrity("approval decision requestId is not apr_<32 hex digits>")
    where = f"approval decision for {request_id}"
    if not isinstance(run_id, str) or not js_trim(run_id):
        raise _integrity(f"{where} has no runId")
    if scope not in SCOPES:
        raise _integrity(shorten(f"{where} has unknown scope {scope!r}", 200))
    if not isinstance(request_hash, str) or not _HASH.fullmatch(request_hash):
        raise _integrity(f"{where} has a requestHash that is not 64 hex digits")
    if value not in ("approved", "rejected"):
        raise _integrity(
            shorten(f"{where} has decision {value!r}, not 'approved' or 'rejected'", 200)
        )
    reviewer = raw.get("reviewer")
    if not isinstance(reviewer, dict):
        raise DurableApprovalError(VALIDATION, f"{where} has no reviewer object")
    # Checked, not trimmed: OMA reads a stored reviewer as it is (assertReviewer), so the id
    # compares with a checkpoint's copy, and is written back, exactly as it was stored.
    stored = Reviewer(cast("str", reviewer.get("id")), reviewer.get("displayName"))
    _check_reviewer_fields(stored)
    decision = ApprovalDecision(
        request_id=request_id,
        run_id=run_id,
        scope=cast("ApprovalScope", scope),
        request_hash=request_hash,
        decision=value,
        reviewer=stored,
        decided_at=_moment(raw.get("decidedAt"), f"{where} decidedAt"),
        edited_input=_edit(raw, where, scope, value, request_hash),
    )
    if request is not None and (
        (request.id, request.run_id, request.scope, request.request_hash)
        != (request_id, run_id, scope, request_hash)
    ):
        raise _integrity(f"{where} does not bind the pending request {request.id}")
    return decision


def _edit(
    raw: dict[str, Any], where: str, scope: object, value: object, request_hash: str
) -> dict[str, Any] | None:
    """The verified ``editedInput`` of a stored decision, or ``None`` when it has none (D17).

    Raises:
        DurableApprovalError: ``APPROVAL_INTEGRITY_ERROR`` when the edit or its hash is
            malformed, on anything but an approved tool call, or changed after the decision.
    """
    if "editedInput" not in raw and "editHash" not in raw:
        return None
    edited = raw.get("editedInput")
    if not isinstance(edited, dict):
        raise _integrity(f"{where} has an editHash but no editedInput object")
    if scope != "tool_call" or value != "approved":
        raise _integrity(f"{where} edits the input of something other than an approved tool call")
    try:
        plain: dict[str, Any] = json.loads(stable_json(edited))
    except DurableApprovalError as exc:
        raise _integrity(f"{where} editedInput is not canonical JSON ({exc})") from None
    if raw.get("editHash") != hash_approval_edit(request_hash, plain):
        raise _integrity(f"{where} editedInput does not match its editHash: changed after review")
    return plain


def check_reviewer(reviewer: object) -> Reviewer:
    """Return ``reviewer`` with its id trimmed as JavaScript trims (``js_trim``), or refuse it.

    The id a decision records is this trimmed id, as OMA's ``decide`` records ``id.trim()``
    (AP-15).

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` when ``reviewer`` is not a
            ``Reviewer`` with a non-blank string id and a ``None`` or string display name.
    """
    if not isinstance(reviewer, Reviewer):
        raise DurableApprovalError(VALIDATION, "approval reviewer must be a Reviewer")
    _check_reviewer_fields(reviewer)
    return Reviewer(js_trim(reviewer.id), reviewer.display_name)


def _check_reviewer_fields(reviewer: Reviewer) -> None:
    if not isinstance(reviewer.id, str) or not js_trim(reviewer.id):
        raise DurableApprovalError(VALIDATION, "approval reviewer id must be a non-empty string")
    if reviewer.display_name is not None and not isinstance(reviewer.display_name, str):
        raise DurableApprovalError(VALIDATION, "approval reviewer displayName must be a string")


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRecord:
    """One verified ledger row: the request, its decision if any, and the stored text.

    Attributes:
        request: The request, re-verified against its hash and id.
        decision: The recorded decision, bound to ``request``; ``None`` while pending.
        raw: The stored value text exactly as read (what a decision's compare-and-set expects).
    """

    request: ApprovalRequest
    decision: ApprovalDecision | None
    raw: str


def record_text(request: ApprovalRequest, decision: ApprovalDecision | None = None) -> str:
    """The stored text of a new row: ``{version: 1, request, decision?}`` in OMA's order (AP-11)."""
    body: dict[str, Any] = {"version": 1, "request": request_to_json(request)}
    if decision is not None:
        body["decision"] = decision_to_json(decision)
    return ordered_json(body)


def decided_record_text(record: ApprovalRecord, decision: ApprovalDecision) -> str:
    """The text of ``record``'s row with ``decision`` added, as OMA re-writes a row.

    The row's members, and the request's, keep the order of the text that was read (``raw``),
    so a row OMA wrote comes back byte for byte apart from the appended ``decision``.
    """
    body: dict[str, Any] = json.loads(record.raw)
    body["decision"] = decision_to_json(decision)
    return ordered_json(body)


def parse_record(text: str, request_id: str) -> ApprovalRecord:
    """Parse and verify the stored text of the row keyed ``request_id`` (AP-11, AP-13).

    Raises:
        DurableApprovalError: ``APPROVAL_INTEGRITY_ERROR`` when ``text`` is not JSON, not a
            version 1 record, holds another request than ``request_id``, or any part of it
            does not verify (a bad reviewer included).
    """
    where = f"approval row {request_id}"
    try:
        raw: Any = json.loads(text, parse_constant=reject_constant)
    except ValueError:
        raise _integrity(f"{where} is not valid JSON{sealed_note(text)}") from None
    if not isinstance(raw, dict) or not _is_one(raw.get("version")):
        raise _integrity(f"{where} is not a version 1 approval record")
    request = request_from_json(raw.get("request"))
    if request.id != request_id:
        raise _integrity(f"{where} holds request {request.id}")
    decision = None
    if "decision" in raw:
        try:
            decision = decision_from_json(raw["decision"], request=request)
        except DurableApprovalError as exc:  # a bad reviewer in a stored row is corruption
            raise _integrity(f"{where} has an invalid decision: {exc}") from None
    return ApprovalRecord(request=request, decision=decision, raw=text)


def _integrity(message: str) -> DurableApprovalError:
    return DurableApprovalError(INTEGRITY, message)


def _is_one(version: object) -> bool:
    # JSON has one number type: 1 and 1.0 are the same version; true is not.
    return type(version) in (int, float) and version == 1


def _moment(raw: object, where: str) -> datetime:
    if isinstance(raw, str):
        try:
            return from_iso(raw)
        except ValueError:
            pass
    raise _integrity(f"{where} is not a parseable date")

"""OMA progress events as wire events (without their sequence numbers).

``type`` is the snake_case name of the event class (``TaskStarted`` -> ``task_started``), so an
event type added to oma_actors later reaches clients without a change here; ``data`` holds the
event's fields as JSON, agent results summarized (success, output, turns, usage).
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from oma_actors import AgentRunResult
from oma_actors.approvals import ApprovalRequest, approval_hash_input
from oma_actors.events import ApprovalPending, TaskCompleted, TaskFailed, TaskSkipped, TaskStarted
from oma_actors.readable import to_iso
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.convert import dict_to_struct, now, timestamp
from sidecar.status import OutOfRange

if TYPE_CHECKING:
    from collections.abc import Collection

    from oma_actors.events import ProgressEvent

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
MAX_OUTPUT = 4000


def event_type(event: ProgressEvent) -> str:
    """``TaskStarted`` -> ``task_started``."""
    return _CAMEL.sub("_", type(event).__name__).lower()


def _summary(result: AgentRunResult) -> dict[str, Any]:
    return {
        "success": result.success,
        "output": result.output[:MAX_OUTPUT],
        "turns": result.turns,
        "input_tokens": result.token_usage.input_tokens,
        "output_tokens": result.token_usage.output_tokens,
        "tool_calls": len(result.tool_calls),
    }


def approval_request_dict(request: ApprovalRequest) -> dict[str, Any]:
    """The JSON fields of an approval request."""
    return {
        "id": request.id,
        "run_id": request.run_id,
        "scope": request.scope,
        "boundary": request.boundary,
        "request_hash": request.request_hash,
        "reason": request.reason,
        "requested_at": to_iso(request.requested_at),
        "content": request.content,
    }


def _jsonable(value: object) -> object:
    if isinstance(value, AgentRunResult):
        return _summary(value)
    if isinstance(value, ApprovalRequest):
        return approval_request_dict(value)
    if isinstance(value, datetime):
        return to_iso(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def event_message(event: ProgressEvent) -> pb.RunEvent:
    """The wire event of ``event``: type, task, agent, data and typed detail (no seq yet)."""
    fields = {
        f.name: _jsonable(getattr(event, f.name))
        for f in dataclasses.fields(event)
        if f.name != "run_id"
    }
    message = pb.RunEvent(
        run_id=event.run_id or "",
        type=event_type(event),
        task_id=str(fields.get("task_id") or ""),
        agent=str(fields.get("agent") or ""),
        data=dict_to_struct(fields),
    )
    match event:
        case TaskStarted():
            message.task_status.status = pb.TASK_STATUS_IN_PROGRESS
        case TaskCompleted():
            message.task_status.status = pb.TASK_STATUS_COMPLETED
        case TaskFailed(error=error):
            message.task_status.status = pb.TASK_STATUS_FAILED
            message.task_status.reason = error
        case TaskSkipped(reason=reason):
            message.task_status.status = pb.TASK_STATUS_SKIPPED
            message.task_status.reason = reason
        case ApprovalPending(request=request):
            message.approval_pending.CopyFrom(approval_pb(request, canonical_json(request)))
        case _:
            pass
    return message


SCOPES = {
    "plan": pb.APPROVAL_SCOPE_PLAN,
    "task_round": pb.APPROVAL_SCOPE_TASK_ROUND,
    "task_dispatch": pb.APPROVAL_SCOPE_TASK_DISPATCH,
    "tool_call": pb.APPROVAL_SCOPE_TOOL_CALL,
}


def canonical_json(request: ApprovalRequest) -> str:
    """The exact text the request hash was taken over."""
    return approval_hash_input(request.scope, request.boundary, request.content)


def approval_pb(request: ApprovalRequest, canonical: str = "") -> pb.Approval:
    """A pending approval on the wire (``canonical`` is the hashed canonical JSON)."""
    return pb.Approval(
        id=request.id,
        run_id=request.run_id,
        scope=SCOPES.get(request.scope, pb.APPROVAL_SCOPE_UNSPECIFIED),
        boundary=request.boundary,
        request_hash=request.request_hash,
        canonical_json=canonical,
        reason=request.reason or "",
        requested_at=timestamp(request.requested_at),
        state=pb.APPROVAL_STATE_PENDING,
    )


def gap_event(run_id: str, *, allow_gap: bool, first: int, last: int) -> pb.RunEvent:
    """The ``gap`` event telling a watcher that seqs ``first..last`` will never reach it.

    Raises:
        OutOfRange: ``allow_gap`` is off (reason ``SEQ_EXPIRED``, ``oldest_seq`` in the metadata:
            the seq the watcher can resume after the gap with).
    """
    if not allow_gap:
        raise OutOfRange(
            "SEQ_EXPIRED",
            f"events {first}..{last} are not retained (set allow_gap to skip them)",
            metadata={"oldest_seq": str(last + 1)},
        )
    # The gap's seq is its last missing seq: seq 0 is the heartbeat's, and a client that
    # resumes after the gap's seq must not be told about the same gap again.
    event = pb.RunEvent(seq=last, run_id=run_id, type="gap", time=timestamp(now()))
    event.gap.from_seq = first
    event.gap.to_seq = last
    return event


RUN_STATUS = "run_status"
"""The type of the event announcing a change of the run's status (``RunStatusChanged``)."""


def selected(event_type: str, types: Collection[str]) -> bool:
    """Whether a watch asking for ``types`` (empty: every type) is sent an event of
    ``event_type``.

    ``run_status`` is sent whatever ``types`` names (``WatchRunRequest.types``): it is how a
    watcher learns that the run ended, or waits for a decision, on either stream.
    """
    return not types or event_type in types or event_type == RUN_STATUS

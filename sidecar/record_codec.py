"""The storage format of run records: versioned JSON, plus the reader of the format before it.

Schema 3 (``encode`` writes it)::

    {"schema": 3, "run_id": "...", "request_id": "...", "attempt": 1,
     "created_at": "<ISO 8601>", "updated_at": "...",
     "outcome": {"code": "", "message": ""},
     "tasks": [{"id": "t1", "title": "...", "status": "pending", "assignee": "",
                "depends_on": [], "result": ""}],
     "result": null | {"success": true, "code": "ok", "message": "", "synthesis": "",
                       "input_tokens": 0, "output_tokens": 0, "plan_only": false,
                       "approval_decisions": [{"request_id": "apr_...", "run_id": "...",
                           "scope": "tool_call", "request_hash": "<sha256 hex>",
                           "decision": "approved", "reviewer_id": "ann", "reviewer_name": "",
                           "decided_at": "<ISO 8601>", "edited_input_json": ""}]},
     "store_uri": "file:///...", "seq_reserved_until": 1024,
     "request_digest": "<sha256 hex>", "tenant": "acme", "spec": {...}}

(``request_digest``, ``tenant`` and the result's ``approval_decisions`` were added later: a
record without them reads them as ``""`` and no decisions, and a sidecar from before them
ignores them, so they needed no new schema;
``"deleting": true`` is written only while ``DeleteRun`` removes the run, ``"forked": true``
only for a run ``ForkRun`` made. A record written before
the run record became the only authority on a run's status (D16) has a ``"status"`` and a
``"pending_approvals"``: they are read as ``legacy_status`` and ``legacy_pending``, shown only
while the run has no run record, and kept when such a record is written again, so an old
finished run is never taken for an interrupted one.)

Schema 2 is schema 3 with ``"pending_approvals"``: the approvals the run waited for when its
last attempt ended, which its run record's suspension names (D16); read, they are kept only in a
record from before D16. Schema 1 is schema 2 with an ``"owner_id"``: the sidecar that last
claimed the run, ``""`` for a forked run nobody had started. The run record's lease names who
holds a run (D16), so schema 2 keeps no owner; a schema 1 record is read with ``forked`` for an
empty owner. An older sidecar refuses a newer schema as unknown rather than misread it.

Every field is the registry's own, stored by name (task statuses as ``running``, ``completed``...),
so the record does not change when a wire message gains a field or renumbers nothing. The one
part kept in the API's own shape is ``spec``: it *is* the ``StartRunRequest`` the client sent,
replayed by ``RestoreRun``, so it is stored in protobuf's canonical JSON mapping (field names,
readable, never bytes).

The format before schema 1 (``{"version": 1, ...}`` with base64 protobuf blobs and no owner)
is still read, so a state file written by an older sidecar loads; the registry writes such a
record in schema 2 the next time it changes it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError

from oma_actors import DurableApprovalError
from oma_actors.approvals import decision_from_json, decision_to_json
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.record import AttemptResult, Outcome, RunRecordV1, TaskRow
from sidecar.run_view import attempt_result_of, task_row_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.approvals import ApprovalDecision
    from sidecar.record import WireStatus, WireTaskStatus

logger = logging.getLogger(__name__)

SCHEMA = 3
WAITING_SCHEMA = 2  # schema 3 with pending approvals (see the module docstring)
OWNED_SCHEMA = 1  # schema 2 with an owner
LEGACY_VERSION = 1  # the "version" of the format before schema 1

_RUN_STATUS: dict[str, WireStatus] = {
    name.removeprefix("RUN_STATUS_").lower(): value for name, value in pb.RunStatus.items()
}
_RUN_STATUS_NAME = {value: name for name, value in _RUN_STATUS.items()}
_TASK_STATUS: dict[str, WireTaskStatus] = {
    name.removeprefix("TASK_STATUS_").lower(): value for name, value in pb.TaskStatus.items()
}
_TASK_STATUS_NAME = {value: name for name, value in _TASK_STATUS.items()}


class RecordFormatError(ValueError):
    """A stored run record cannot be read: malformed JSON, a missing field or unknown schema."""


def encode(record: RunRecordV1) -> str:
    """The stored text of ``record`` (schema 3, compact JSON)."""
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": record.run_id,
        "request_id": record.request_id,
        "attempt": record.attempt,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "outcome": {"code": record.outcome.code, "message": record.outcome.message},
        "tasks": [_task_document(task) for task in record.tasks],
        "result": _result_document(record.result),
        "store_uri": record.store_uri,
        "seq_reserved_until": record.seq_reserved_until,
        "request_digest": record.request_digest,
        "tenant": record.tenant,
        "spec": json_format.MessageToDict(record.request, preserving_proto_field_name=True),
    }
    if record.deleting:
        document["deleting"] = True
    if record.resume_held:
        document["resume_held"] = True
    if record.forked:
        document["forked"] = True
    if record.legacy_status is not None:
        document["status"] = _RUN_STATUS_NAME[record.legacy_status]
        document["pending_approvals"] = list(record.legacy_pending)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def decode(text: str) -> RunRecordV1:
    """Read a stored record, in schema 3, 2, 1 or the format before them.

    Raises:
        RecordFormatError: the text is not a record this sidecar can read.
    """
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise RecordFormatError("a run record is a JSON object")
        if "schema" in raw:
            if raw["schema"] not in (SCHEMA, WAITING_SCHEMA, OWNED_SCHEMA):
                raise RecordFormatError(f"unknown run record schema {raw['schema']!r}")
            return _from_schema(raw)
        if raw.get("version") == LEGACY_VERSION:
            return _from_legacy(raw)
        raise RecordFormatError("neither a schema nor a version: not a run record")
    except RecordFormatError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, DecodeError, RecursionError) as exc:
        # json_format.ParseError and binascii.Error are ValueErrors too; RecursionError is
        # JSON nested too deeply to parse.
        raise RecordFormatError(f"malformed run record: {type(exc).__name__}: {exc}") from exc


def shown_problem(exc: RecordFormatError) -> str:
    """What a client may be told of an unreadable record (the log has the full error)."""
    cause = exc.__cause__
    # A wrapped parser error may quote the record, and the record may hold a store password.
    return f"malformed run record ({type(cause).__name__})" if cause is not None else str(exc)


def _task_document(task: TaskRow) -> dict[str, Any]:
    return {
        "id": task.id,
        "title": task.title,
        "status": _TASK_STATUS_NAME[task.status],
        "assignee": task.assignee,
        "depends_on": list(task.depends_on),
        "result": task.result,
    }


def _result_document(result: AttemptResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "success": result.success,
        "code": result.outcome.code,
        "message": result.outcome.message,
        "synthesis": result.synthesis,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "plan_only": result.plan_only,
        "approval_decisions": [decision_to_json(d) for d in result.approval_decisions],
    }


def _decision(raw: object) -> ApprovalDecision:
    """A stored decision, checked as the ledger checks its rows (its edit against its hash)."""
    try:
        return decision_from_json(raw)
    except DurableApprovalError as exc:
        raise RecordFormatError(f"a stored approval decision: {exc}") from None


def _run_status(name: str) -> WireStatus:
    try:
        return _RUN_STATUS[name]
    except KeyError:
        raise RecordFormatError(f"unknown run status {name!r}") from None


def _task_status(name: str) -> WireTaskStatus:
    try:
        return _TASK_STATUS[name]
    except KeyError:
        raise RecordFormatError(f"unknown task status {name!r}") from None


def _from_schema(raw: dict[str, Any]) -> RunRecordV1:
    result = raw["result"]
    if raw["schema"] == OWNED_SCHEMA:
        forked = str(raw["owner_id"]) == "" and "status" not in raw
    else:
        forked = raw.get("forked") is True
    spec = json_format.ParseDict(raw["spec"], pb.StartRunRequest())
    legacy = "status" in raw  # written before D16 (any schema)
    return RunRecordV1(
        run_id=str(raw["run_id"]),
        request_id=str(raw["request_id"]),
        request=spec,
        forked=forked,
        legacy_status=_run_status(raw["status"]) if legacy else None,
        legacy_pending=tuple(str(item) for item in raw["pending_approvals"]) if legacy else (),
        attempt=int(raw["attempt"]),
        created_at=datetime.fromisoformat(raw["created_at"]),
        updated_at=datetime.fromisoformat(raw["updated_at"]),
        outcome=Outcome(code=str(raw["outcome"]["code"]), message=str(raw["outcome"]["message"])),
        tasks=tuple(
            TaskRow(
                id=str(task["id"]),
                title=str(task["title"]),
                status=_task_status(task["status"]),
                assignee=str(task["assignee"]),
                depends_on=tuple(str(dep) for dep in task["depends_on"]),
                result=str(task["result"]),
            )
            for task in raw["tasks"]
        ),
        result=None
        if result is None
        else AttemptResult(
            success=bool(result["success"]),
            outcome=Outcome(code=str(result["code"]), message=str(result["message"])),
            synthesis=str(result["synthesis"]),
            input_tokens=int(result["input_tokens"]),
            output_tokens=int(result["output_tokens"]),
            plan_only=bool(result["plan_only"]),
            approval_decisions=tuple(
                _decision(item) for item in result.get("approval_decisions", ())
            ),
        ),
        store_uri=str(raw["store_uri"]),
        seq_reserved_until=int(raw["seq_reserved_until"]),
        request_digest=str(raw.get("request_digest", "")),
        tenant=str(raw.get("tenant", "")),
        deleting=raw.get("deleting") is True,
        resume_held=raw.get("resume_held") is True,
    )


def _from_legacy(raw: dict[str, Any]) -> RunRecordV1:
    """The format before schema 1: base64 protobuf blobs, and no owner."""
    result = raw.get("result")
    return RunRecordV1(
        run_id=raw["run_id"],
        request_id=raw["request_id"],
        request=pb.StartRunRequest.FromString(base64.b64decode(raw["request"], validate=True)),
        legacy_status=pb.RunStatus.Value(raw["status"]),
        attempt=int(raw["attempt"]),
        created_at=datetime.fromisoformat(raw["created_at"]),
        updated_at=datetime.fromisoformat(raw["updated_at"]),
        outcome=Outcome(**raw["outcome"]),
        tasks=tuple(
            task_row_of(pb.TaskState.FromString(base64.b64decode(item, validate=True)))
            for item in raw["tasks"]
        ),
        result=(
            attempt_result_of(pb.RunResult.FromString(base64.b64decode(result, validate=True)))
            if result
            else None
        ),
        legacy_pending=tuple(raw.get("pending_approvals", ())),
        store_uri=raw.get("store_uri", ""),
        seq_reserved_until=int(raw["seq_reserved_until"]),
    )


# -- event history ----------------------------------------------------------------------------
# A finished run's events are wire messages replayed verbatim to later watchers, so they are
# kept as what they are: serialized RunEvents, base64 in a JSON list.


def encode_history(events: Sequence[pb.RunEvent]) -> str:
    """The stored text of a run's retained events."""
    return json.dumps(
        [
            base64.b64encode(event.SerializeToString(deterministic=True)).decode("ascii")
            for event in events
        ],
        separators=(",", ":"),
    )


def decode_history(text: str) -> list[pb.RunEvent]:
    """A run's stored events; an unreadable history is logged and read as none."""
    try:
        return [pb.RunEvent.FromString(base64.b64decode(item)) for item in json.loads(text)]
    except (ValueError, TypeError, binascii.Error, DecodeError, RecursionError) as exc:
        logger.error("unreadable event history: %s", exc)
        return []

"""OMA-compatible JSON for snapshots: write schema v4 (plus ``revision``), read v1..v5.

``decode`` is identity-bound: an unknown schema raises ``UnsupportedSchemaError``, a value that
fails the validator raises ``CheckpointError``, and neither is ever read as "no checkpoint".
"""

from __future__ import annotations

import json
from typing import Any

from oma_actors.checkpoint.snapshot import (
    READ_VERSIONS,
    WRITE_VERSION,
    CheckpointSnapshot,
    CompletedTask,
    InFlightTask,
    RunIdentity,
)
from oma_actors.checkpoint.validate import problem
from oma_actors.domain.jsonforms import (
    result_from_json,
    result_to_json,
    runner_from_json,
    runner_to_json,
    task_from_json,
    task_to_json,
)
from oma_actors.errors import CheckpointError, UnsupportedSchemaError

_PARTITIONS = (
    ("pending", "pending"),
    ("inProgress", "in_progress"),
    ("completed", "completed"),
    ("failed", "failed"),
    ("blocked", "blocked"),
    ("skipped", "skipped"),
)


def to_json_object(snapshot: CheckpointSnapshot) -> dict[str, Any]:
    """The v4 JSON object of ``snapshot`` (field order as OMA writes it)."""
    identity = snapshot.identity
    out: dict[str, Any] = {
        "version": WRITE_VERSION,
        "mode": snapshot.mode,
        "createdAt": snapshot.created_at,
        "revision": snapshot.revision,
    }
    if snapshot.metadata is not None:
        out["metadata"] = snapshot.metadata
    if identity is not None:
        out["identity"] = {
            "runId": identity.run_id,
            "attempt": identity.attempt,
            "lastTraceId": identity.trace_id,
            "lastRootSpanId": identity.root_span_id,
        }
    if snapshot.goal is not None:
        out["goal"] = snapshot.goal
    queue: dict[str, Any] = {"version": 1, "tasks": [task_to_json(t) for t in snapshot.tasks]}
    for name, status in _PARTITIONS:
        queue[name] = [task.id for task in snapshot.tasks if task.status == status]
    out["queue"] = queue
    if snapshot.shared_memory is not None:
        out["sharedMemory"] = snapshot.shared_memory
    out["messageBus"] = snapshot.message_bus or {"version": 1, "messages": [], "readState": []}
    if snapshot.turn_count is not None:
        out["turnCount"] = snapshot.turn_count
    out["completedTaskResults"] = [_completed_to_json(item) for item in snapshot.completed]
    out["inFlightTasks"] = [
        runner_to_json(item.task_id, item.assignee, item.state) for item in snapshot.in_flight
    ]
    out["pendingApprovals"] = list(snapshot.pending_approvals)
    out["approvalDecisions"] = list(snapshot.approval_decisions)
    if snapshot.synthesis is not None:
        out["synthesisResult"] = result_to_json(snapshot.synthesis)
    return out


def encode(snapshot: CheckpointSnapshot) -> str:
    """Compact JSON text of ``snapshot`` (raises ``CheckpointError`` if it is not JSON-safe)."""
    try:
        return json.dumps(to_json_object(snapshot), separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"snapshot cannot be serialized: {exc}") from exc


def _completed_to_json(item: CompletedTask) -> dict[str, Any]:
    out: dict[str, Any] = {"taskId": item.task_id}
    if item.assignee is not None:
        out["assignee"] = item.assignee
    if item.result is not None:
        out["result"] = item.result
    if item.agent_result is not None:
        candidate = result_to_json(item.agent_result)
        try:
            json.dumps(candidate)
        except (TypeError, ValueError):
            return out  # CK-10: durability wins over completeness
        out["agentResult"] = candidate
    return out


def decode(text: str, *, key: str) -> CheckpointSnapshot:
    """Parse and validate a stored checkpoint value.

    Raises:
        CheckpointError: not JSON, or not a checkpoint snapshot (the reason is named).
        UnsupportedSchemaError: a ``version`` this build cannot read.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raise CheckpointError(f'Checkpoint: stored value at "{key}" is not valid JSON.') from None
    if isinstance(raw, dict) and raw.get("version") not in READ_VERSIONS:
        raise UnsupportedSchemaError(raw.get("version"), READ_VERSIONS)
    reason = problem(raw)
    if reason is not None:
        raise CheckpointError(
            f'Checkpoint: stored value at "{key}" is not a checkpoint snapshot: {reason}.'
        )
    try:
        return from_json_object(raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f'Checkpoint: stored value at "{key}" is not a checkpoint snapshot: {exc!r}.'
        ) from exc


def from_json_object(raw: dict[str, Any]) -> CheckpointSnapshot:
    """Build the typed snapshot from a validated JSON object (v1..v5)."""
    version: int = raw["version"]
    identity = None
    if version >= 2:
        ident = raw["identity"]
        identity = RunIdentity(
            run_id=ident["runId"],
            attempt=ident["attempt"],
            trace_id=ident["lastTraceId"],
            root_span_id=ident["lastRootSpanId"],
        )
    run_id = identity.run_id if identity else str(raw.get("runId") or "")
    tasks = tuple(task_from_json(t) for t in raw["queue"]["tasks"])
    completed = tuple(
        CompletedTask(
            task_id=item["taskId"],
            assignee=item.get("assignee"),
            result=item.get("result"),
            agent_result=(
                result_from_json(item["agentResult"], item.get("result") or "")
                if "agentResult" in item
                else None
            ),
        )
        for item in raw["completedTaskResults"]
        if isinstance(item, dict) and isinstance(item.get("taskId"), str)
    )
    in_flight = tuple(
        InFlightTask(task_id=e["taskId"], assignee=e["assignee"], state=runner_from_json(e))
        for e in (raw.get("inFlightTasks") or [] if version >= 3 else [])
    )
    synthesis = raw.get("synthesisResult")
    return CheckpointSnapshot(
        version=version,
        mode=raw["mode"],
        run_id=run_id,
        attempt=identity.attempt if identity else 1,
        revision=int(raw.get("revision", 0)),
        created_at=raw["createdAt"],
        tasks=tasks,
        identity=identity,
        goal=raw.get("goal"),
        metadata=raw.get("metadata"),
        shared_memory=raw.get("sharedMemory"),
        message_bus=raw.get("messageBus"),
        turn_count=raw.get("turnCount"),
        completed=completed,
        in_flight=in_flight,
        pending_approvals=tuple(raw.get("pendingApprovals") or ()) if version >= 4 else (),
        approval_decisions=tuple(raw.get("approvalDecisions") or ()) if version >= 4 else (),
        synthesis=result_from_json(synthesis, "") if isinstance(synthesis, dict) else None,
        raw=raw,
    )

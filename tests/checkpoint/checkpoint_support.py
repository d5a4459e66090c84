"""Shared data for the checkpoint codec tests: golden paths, fixed values and snapshot builders."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oma_actors.checkpoint import (
    CheckpointSnapshot,
    CompletedTask,
    RunIdentity,
    decode,
)
from oma_actors.domain.messages import Message, TextBlock, TokenUsage
from oma_actors.domain.results import AgentRunResult
from oma_actors.domain.tasks import TaskState

GOLDEN_DIR = Path(__file__).parent / "golden"
# The TypeScript OMA fixtures live in shared/, beside the repository (never an absolute path).
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
OMA_FIXTURE_DIR = SHARED / "fixtures" / "oma" / "task-boundary"
KEY = "__oma_checkpoint__/test-run/latest"

# A real 1x1 PNG, base64-encoded: inline image data as OMA embeds it in checkpoint JSON.
PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

T0 = datetime(2025, 11, 5, 11, 58, 0, 125000, tzinfo=UTC)
T1 = datetime(2025, 11, 5, 11, 59, 30, 500000, tzinfo=UTC)
T2 = datetime(2025, 11, 5, 12, 0, 0, 0, tzinfo=UTC)
CREATED_AT = "2025-11-05T12:00:00.000Z"

IDENTITY = RunIdentity(
    run_id="run-test",
    attempt=1,
    trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
    root_span_id="00f067aa0ba902b7",
)


def empty_bus() -> dict[str, Any]:
    """The message bus OMA writes for a team that sent no messages (what ``encode`` defaults to)."""
    return {"version": 1, "messages": [], "readState": []}


def golden_text(name: str) -> str:
    """The exact text of a golden file."""
    return (GOLDEN_DIR / name).read_text(encoding="utf-8")


def golden_json(name: str) -> dict[str, Any]:
    """A golden file parsed (a fresh object on every call, safe to mutate)."""
    value: dict[str, Any] = json.loads(golden_text(name))
    return value


def oma_fixture_json(name: str) -> Any:
    """A file of the TypeScript OMA fixture, parsed."""
    return json.loads((OMA_FIXTURE_DIR / name).read_text(encoding="utf-8"))


def _decode_golden(name: str) -> CheckpointSnapshot:
    return decode(golden_text(name), key=KEY)


def _statuses(snapshot: CheckpointSnapshot) -> dict[str, str]:
    return {task.title: task.status for task in snapshot.tasks}


def task_state(
    task_id: str,
    status: str,
    *,
    assignee: str | None = "worker",
    depends_on: tuple[str, ...] = (),
    result: str | None = None,
) -> TaskState:
    """A task with fixed, millisecond-exact timestamps (so it survives the codec unchanged)."""
    return TaskState(
        id=task_id,
        title=task_id,
        description=f"do {task_id}",
        status=status,  # type: ignore[arg-type]
        assignee=assignee,
        depends_on=depends_on,
        result=result,
        created_at=T0,
        updated_at=T1,
    )


def make_snapshot(
    *,
    tasks: tuple[TaskState, ...] | None = None,
    completed: tuple[CompletedTask, ...] | None = None,
    identity: RunIdentity | None = IDENTITY,
    **changes: Any,
) -> CheckpointSnapshot:
    """A small valid v4 snapshot: task ``a`` completed, ``b`` pending after it.

    Every value is canonical (what ``decode`` returns), so ``decode(encode(s)) == s``.
    """
    if tasks is None:
        tasks = (
            task_state("a", "completed", result="a done"),
            task_state("b", "pending", depends_on=("a",)),
        )
    if completed is None:
        completed = tuple(
            CompletedTask(
                task_id=task.id,
                assignee=task.assignee,
                result=task.result,
                agent_result=AgentRunResult(
                    success=True,
                    output=task.result or "",
                    messages=[Message("assistant", [TextBlock(task.result or "")])],
                    token_usage=TokenUsage(3, 2),
                    turns=1,
                ),
            )
            for task in tasks
            if task.status == "completed"
        )
    fields: dict[str, Any] = {
        "version": 4,
        "mode": "runTasks",
        "run_id": identity.run_id if identity is not None else "",
        "attempt": identity.attempt if identity is not None else 1,
        "revision": 0,
        "created_at": CREATED_AT,
        "tasks": tasks,
        "identity": identity,
        "completed": completed,
        "message_bus": empty_bus(),
    }
    fields.update(changes)
    return CheckpointSnapshot(**fields)


def stable_json(value: Any) -> str:
    """OMA's canonical JSON (AP-07) for the integer-only values used here."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tool_call_request(
    run_id: str, task_id: str, agent: str, call: dict[str, Any]
) -> dict[str, Any]:
    """A well-formed ``tool_call`` ApprovalRequest for ``call`` (AP-05, AP-06, AP-08, AP-09)."""
    boundary = f"{task_id}:{call['id']}"
    content = {
        "kind": "tool_call",
        "toolName": call["name"],
        "rawInput": call["input"],
        "input": call["input"],
        "agentName": agent,
        "taskId": task_id,
        "toolCallId": call["id"],
        "consequential": True,
    }
    request_hash = hashlib.sha256(
        stable_json({"scope": "tool_call", "boundary": boundary, "content": content}).encode()
    ).hexdigest()
    digest = hashlib.sha256(f"{run_id}\ntool_call\n{boundary}\n{request_hash}".encode()).hexdigest()
    return {
        "version": 1,
        "id": f"apr_{digest[:32]}",
        "runId": run_id,
        "scope": "tool_call",
        "boundary": boundary,
        "requestHash": request_hash,
        "requestedAt": "2025-09-03T10:12:45.700Z",
        "content": content,
    }


def decision_for(request: dict[str, Any], decision: str = "approved") -> dict[str, Any]:
    """An ApprovalDecisionRecord bound to ``request`` (AP-15, AP-16)."""
    return {
        "version": 1,
        "requestId": request["id"],
        "runId": request["runId"],
        "scope": request["scope"],
        "requestHash": request["requestHash"],
        "decision": decision,
        "reviewer": {"id": "ops-oncall", "displayName": "Ops on call"},
        "decidedAt": "2025-09-03T10:20:00.000Z",
    }

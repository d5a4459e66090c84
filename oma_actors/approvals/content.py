"""What a reviewer sees for each scope, its boundary, and the request binding it (AP-05..AP-09).

The builders take OMA ``TaskSnapshot`` JSON (``oma_actors.domain.jsonforms.task_to_json``) rather
than live tasks, so content is plain data from the start and hashes exactly like OMA's.
``create_approval_request`` turns content into a request; ``content_problem`` is the structural
check a stored request's content must pass (AP-14).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from oma_actors.approvals.canonical import (
    VALIDATION,
    approval_request_id,
    hash_approval_request,
    js_trim,
    stable_json,
)
from oma_actors.clock import SYSTEM_CLOCK, from_iso, to_iso
from oma_actors.domain.approvals import ApprovalRequest
from oma_actors.errors import DurableApprovalError
from oma_actors.readable import shorten

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from oma_actors.clock import Clock
    from oma_actors.domain.approvals import ApprovalScope

Continuation = Literal["execute", "plan_only"]
PLAN_BOUNDARY = "coordinator-plan"
"""The boundary of every plan request: there is one plan per run."""

SCOPES = ("plan", "task_round", "task_dispatch", "tool_call")
_SNAPSHOT_STRINGS = ("id", "title", "description", "status", "createdAt", "updatedAt")
_TOOL_STRINGS = ("toolName", "agentName", "taskId", "toolCallId")


def plan_content(
    tasks_json: Sequence[Mapping[str, Any]], continuation: Continuation
) -> dict[str, Any]:
    """Content of a ``plan`` request: every decomposed task, and what approval will do.

    Args:
        tasks_json: The task snapshots of the whole queue.
        continuation: ``"execute"`` to run the plan once approved, ``"plan_only"`` to stop there.

    Returns:
        ``{kind: "plan", continuation, tasks}``; the boundary is ``PLAN_BOUNDARY``.
    """
    return {"kind": "plan", "continuation": continuation, "tasks": list(tasks_json)}


def dispatch_content(task_json: Mapping[str, Any]) -> dict[str, Any]:
    """Content of a ``task_dispatch`` request: the assigned task about to be dispatched.

    Returns:
        ``{kind: "task_dispatch", task}``; the boundary is the task id (``dispatch_boundary``).
    """
    return {"kind": "task_dispatch", "task": task_json}


def dispatch_boundary(task_json: Mapping[str, Any]) -> str:
    """The boundary of a dispatch request: the task's id."""
    return str(task_json["id"])


def round_content(
    completed: Sequence[Mapping[str, Any]], next: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Content of a legacy ``task_round`` request: the round just finished and the next one.

    Returns:
        ``{kind: "task_round", completedTasks, nextTasks}``; see ``round_boundary``.
    """
    return {"kind": "task_round", "completedTasks": list(completed), "nextTasks": list(next)}


def round_boundary(
    completed: Sequence[Mapping[str, Any]], next: Sequence[Mapping[str, Any]]
) -> str:
    """The boundary of a round request: ``"<completed ids>-><next ids>"``, ids joined by ``,``."""
    done = ",".join(str(task["id"]) for task in completed)
    return done + "->" + ",".join(str(task["id"]) for task in next)


def tool_call_content(
    *,
    tool_name: str,
    raw_input: Mapping[str, Any],
    input: Mapping[str, Any],
    agent_name: str,
    task_id: str,
    tool_call_id: str,
    consequential: bool = False,
) -> dict[str, Any]:
    """Content of a ``tool_call`` request: the call as the model issued it and as validated.

    Args:
        tool_name: The tool being called.
        raw_input: The input exactly as the model issued it.
        input: The input after schema validation (what the tool would receive).
        agent_name: The agent making the call.
        task_id: The task the agent is working on.
        tool_call_id: The model's id for this call.
        consequential: Whether the tool is marked consequential.

    Returns:
        The content; the boundary is ``tool_call_boundary(task_id, tool_call_id)``.
    """
    return {
        "kind": "tool_call",
        "toolName": tool_name,
        "rawInput": raw_input,
        "input": input,
        "agentName": agent_name,
        "taskId": task_id,
        "toolCallId": tool_call_id,
        "consequential": consequential,
    }


def tool_call_boundary(task_id: str, tool_call_id: str) -> str:
    """The boundary of a tool-call request: ``"<task_id>:<tool_call_id>"``."""
    return f"{task_id}:{tool_call_id}"


def create_approval_request(
    *,
    run_id: str,
    scope: ApprovalScope,
    boundary: str,
    content: Mapping[str, Any],
    reason: str | None = None,
    requested_at: datetime | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> ApprovalRequest:
    """Build a request whose hash binds ``scope``, ``boundary`` and ``content`` (AP-05..AP-09).

    ``run_id`` and ``boundary`` are trimmed as JavaScript trims (``js_trim``). The request
    holds a canonical deep copy of ``content`` (later changes to the caller's dict cannot drift
    from the hash), and ``requested_at`` (default: ``clock.now()``) is cut to milliseconds, as
    it is stored.

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` when ``run_id`` or ``boundary`` is
            blank, ``scope`` is unknown or differs from ``content["kind"]``, ``reason`` is not a
            string, or ``content`` is not valid canonical JSON content for its scope.
    """
    run_id, boundary = _trimmed(run_id), _trimmed(boundary)
    if not run_id or not boundary:
        raise DurableApprovalError(VALIDATION, "approval runId and boundary must be non-empty")
    if scope not in SCOPES:
        raise DurableApprovalError(VALIDATION, f"unknown approval scope {scope!r}")
    kind = content.get("kind") if _is_mapping(content) else None
    if kind != scope:
        raise DurableApprovalError(
            VALIDATION,
            shorten(f"approval scope {scope!r} does not match content kind {kind!r}", 200),
        )
    if reason is not None and not isinstance(reason, str):
        raise DurableApprovalError(VALIDATION, "approval reason must be a string")
    plain: dict[str, Any] = json.loads(stable_json(content))
    problem = content_problem(plain)
    if problem is not None:
        raise DurableApprovalError(VALIDATION, f"invalid approval content: {problem}")
    request_hash = hash_approval_request(scope, boundary, plain)
    return ApprovalRequest(
        id=approval_request_id(run_id, scope, boundary, request_hash),
        run_id=run_id,
        scope=scope,
        boundary=boundary,
        request_hash=request_hash,
        requested_at=from_iso(to_iso(requested_at or clock.now())),
        reason=reason,
        content=plain,
    )


def content_boundary(content: Mapping[str, Any]) -> str:
    """The boundary that ``content`` implies (assumes ``content_problem(content)`` is ``None``)."""
    kind = content["kind"]
    if kind == "plan":
        return PLAN_BOUNDARY
    if kind == "task_dispatch":
        return dispatch_boundary(content["task"])
    if kind == "task_round":
        return round_boundary(content["completedTasks"], content["nextTasks"])
    return tool_call_boundary(content["taskId"], content["toolCallId"])


def content_problem(content: object) -> str | None:
    """Why ``content`` is not valid approval content (AP-14), or ``None`` when it is.

    Only the structure is checked here; whether every value is canonical JSON is checked when
    the request is hashed.
    """
    if not isinstance(content, dict):
        return "content must be an object"
    kind = content.get("kind")
    if kind == "plan":
        if content.get("continuation") not in ("execute", "plan_only"):
            return "plan continuation must be 'execute' or 'plan_only'"
        return _snapshots_problem(content.get("tasks"), "plan tasks")
    if kind == "task_round":
        return _snapshots_problem(
            content.get("completedTasks"), "round completedTasks"
        ) or _snapshots_problem(content.get("nextTasks"), "round nextTasks")
    if kind == "task_dispatch":
        return _snapshot_problem(content.get("task"), "dispatch task")
    if kind == "tool_call":
        for field in _TOOL_STRINGS:
            if not isinstance(content.get(field), str):
                return f"tool_call {field} must be a string"
        for field in ("rawInput", "input"):
            if not isinstance(content.get(field), dict):
                return f"tool_call {field} must be an object"
        if not isinstance(content.get("consequential"), bool):
            return "tool_call consequential must be a boolean"
        return None
    return shorten(f"unknown content kind {kind!r}", 200)


def _snapshots_problem(tasks: object, where: str) -> str | None:
    if not isinstance(tasks, list):
        return f"{where} must be an array"
    for index, task in enumerate(tasks):
        problem = _snapshot_problem(task, f"{where}[{index}]")
        if problem is not None:
            return problem
    return None


def _snapshot_problem(task: object, where: str) -> str | None:
    if not isinstance(task, dict):
        return f"{where} must be a task snapshot object"
    for field in _SNAPSHOT_STRINGS:
        if not isinstance(task.get(field), str):
            return f"{where} is not a task snapshot: {field} must be a string"
    return None


def _trimmed(text: object) -> str:
    return js_trim(text) if isinstance(text, str) else ""


def _is_mapping(value: object) -> bool:
    return callable(getattr(value, "get", None)) and callable(getattr(value, "keys", None))

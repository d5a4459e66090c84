"""Builders shared by the approval tests: fixed task snapshots, requests and stored-row edits."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from oma_actors.approvals import (
    PLAN_BOUNDARY,
    approval_key,
    create_approval_request,
    dispatch_boundary,
    dispatch_content,
    plan_content,
    tool_call_boundary,
    tool_call_content,
)
from oma_actors.domain.approvals import ApprovalRequest
from oma_actors.domain.jsonforms import task_to_json
from oma_actors.domain.tasks import TaskState
from oma_actors.stores.base import MemoryStore

REQUESTED_AT = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def task_json(task_id: str = "t1", *, status: str = "pending", **overrides: Any) -> dict[str, Any]:
    """A real OMA TaskSnapshot (with a float retryBackoff and metadata)."""
    task = TaskState(
        id=task_id,
        title=f"Title {task_id}",
        description=f"Do {task_id}",
        status=status,  # type: ignore[arg-type]
        assignee="worker",
        max_retries=2,
        metadata={"priority": 1},
        created_at=REQUESTED_AT,
        updated_at=REQUESTED_AT,
    )
    return {**task_to_json(task), **overrides}


def tool_request(
    *, run_id: str = "run-1", reason: str | None = "Finance review"
) -> ApprovalRequest:
    """A pending ``charge_card`` call (T-41's shape)."""
    content = tool_call_content(
        tool_name="charge_card",
        raw_input={"amount": "7"},
        input={"amount": 7},
        agent_name="worker",
        task_id="t1",
        tool_call_id="call-1",
        consequential=True,
    )
    return create_approval_request(
        run_id=run_id,
        scope="tool_call",
        boundary=tool_call_boundary("t1", "call-1"),
        content=content,
        reason=reason,
        requested_at=REQUESTED_AT,
    )


def dispatch_request(task_id: str = "t1", *, run_id: str = "run-1") -> ApprovalRequest:
    """A pending dispatch of ``task_id``."""
    task = task_json(task_id)
    return create_approval_request(
        run_id=run_id,
        scope="task_dispatch",
        boundary=dispatch_boundary(task),
        content=dispatch_content(task),
        requested_at=REQUESTED_AT,
    )


def plan_request(*, run_id: str = "run-1") -> ApprovalRequest:
    """A pending plan of two tasks."""
    return create_approval_request(
        run_id=run_id,
        scope="plan",
        boundary=PLAN_BOUNDARY,
        content=plan_content([task_json("t1"), task_json("t2")], "execute"),
        reason="Human review",
        requested_at=REQUESTED_AT,
    )


async def stored(store: MemoryStore, request_id: str) -> dict[str, Any]:
    """The stored row of ``request_id``, parsed."""
    entry = await store.get(approval_key(request_id))
    assert entry is not None
    parsed: dict[str, Any] = json.loads(entry.value)
    return parsed


async def tamper(
    store: MemoryStore, request_id: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    """Rewrite the stored row of ``request_id`` after ``edit`` changed its parsed JSON."""
    row = await stored(store, request_id)
    edit(row)
    await store.set(approval_key(request_id), json.dumps(row))

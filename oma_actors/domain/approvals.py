"""Approval values carried by run results (the ledger itself lives in ``oma_actors.approvals``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from datetime import datetime

ApprovalScope = Literal["plan", "task_dispatch", "tool_call"]


@dataclass(frozen=True, slots=True)
class Reviewer:
    """Who decided an approval."""

    id: str
    display_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A boundary waiting for a human decision; ``request_hash`` binds the reviewed content."""

    id: str
    run_id: str
    scope: ApprovalScope
    boundary: dict[str, Any]
    request_hash: str
    requested_at: datetime
    reason: str | None
    content: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """A recorded decision on an approval request."""

    request_id: str
    run_id: str
    scope: ApprovalScope
    request_hash: str
    decision: Literal["approve", "reject"]
    reviewer: Reviewer
    decided_at: datetime

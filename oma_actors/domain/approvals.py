"""Approval values carried by run results (the ledger itself lives in ``oma_actors.approvals``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from datetime import datetime

ApprovalScope = Literal["plan", "task_round", "task_dispatch", "tool_call"]
DecisionValue = Literal["approved", "rejected"]


@dataclass(frozen=True, slots=True)
class Reviewer:
    """Who decided an approval."""

    id: str
    display_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A boundary waiting for a human decision; ``request_hash`` binds the reviewed content.

    ``boundary`` names the exact place (``coordinator-plan``, a task id, ``<task>:<call>``);
    ``content`` is what the reviewer sees, and exactly what was hashed (spec AP-05..AP-09).
    """

    id: str
    run_id: str
    scope: ApprovalScope
    boundary: str
    request_hash: str
    requested_at: datetime
    reason: str | None
    content: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """A recorded decision on an approval request (first decision wins; immutable).

    ``edited_input``: an approval of a tool call with the reviewer's input instead of the
    model's (decision D17's "approve with edits"); ``None`` for every other decision, whose
    stored form stays OMA's.
    """

    request_id: str
    run_id: str
    scope: ApprovalScope
    request_hash: str
    decision: DecisionValue
    reviewer: Reviewer
    decided_at: datetime
    edited_input: dict[str, Any] | None = None

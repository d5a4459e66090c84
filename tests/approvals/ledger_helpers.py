"""Helpers shared by the approval ledger tests: a fixed clock, two reviewers, decide shortcuts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from approval_helpers import tool_request

from oma_actors.approvals import (
    ApprovalRecord,
    DurableApprovalLedger,
)
from oma_actors.domain.approvals import Reviewer
from oma_actors.errors import DurableApprovalError
from oma_actors.stores.base import AtomicStore

DECIDED_AT = datetime(2026, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
ALICE = Reviewer("reviewer-a", "Alice")
BOB = Reviewer("reviewer-b")


def _ledger(store: AtomicStore) -> DurableApprovalLedger:
    return DurableApprovalLedger(store, now=lambda: DECIDED_AT)


async def _code(awaitable: Any) -> str:
    with pytest.raises(DurableApprovalError) as caught:
        await awaitable
    return caught.value.code


async def _decide(
    ledger: DurableApprovalLedger,
    request_hash: str | None = None,
    *,
    decision: str = "approve",
    reviewer: Reviewer = ALICE,
    request_id: str | None = None,
) -> ApprovalRecord:
    request = tool_request()
    return await ledger.decide(
        request_id=request_id or request.id,
        request_hash=request_hash or request.request_hash,
        decision=decision,  # type: ignore[arg-type]
        reviewer=reviewer,
    )

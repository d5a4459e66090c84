"""The approval ledger deciding (AP-13..AP-16): T-32, T-53, refusals, check order, tamper."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from approval_helpers import dispatch_request, tamper, tool_request
from ledger_helpers import ALICE, BOB, _code, _decide, _ledger

from oma_actors.approvals import (
    DurableApprovalLedger,
    approval_key,
    approval_request_id,
    get_approval_record,
    hash_approval_request,
)
from oma_actors.domain.approvals import Reviewer
from oma_actors.errors import DurableApprovalError
from oma_actors.stores.base import AtomicStore


async def test_t32_tampered_tool_name_is_an_integrity_error(store: AtomicStore) -> None:
    request = tool_request()
    await _ledger(store).ensure_request(request)
    await tamper(store, request.id, lambda row: row["request"]["content"].update(toolName="rm_rf"))
    assert await _code(get_approval_record(store, request.id)) == "APPROVAL_INTEGRITY_ERROR"


async def test_t53_decide_refusals(store: AtomicStore) -> None:
    ledger = _ledger(store)
    request, other = tool_request(), dispatch_request()
    assert await _code(_decide(ledger, decision="maybe")) == "APPROVAL_VALIDATION_ERROR"
    assert await _code(_decide(ledger)) == "APPROVAL_NOT_FOUND"
    await store.set(approval_key(request.id), "{")
    assert await _code(_decide(ledger)) == "APPROVAL_INTEGRITY_ERROR"
    await ledger.ensure_request(other)
    moved = await store.get(approval_key(other.id))
    assert moved is not None
    await store.set(approval_key(request.id), moved.value)
    assert await _code(_decide(ledger)) == "APPROVAL_INTEGRITY_ERROR"
    await store.delete(approval_key(request.id))
    await ledger.ensure_request(request)
    await _decide(ledger, reviewer=ALICE)
    assert await _code(_decide(ledger, reviewer=BOB)) == "APPROVAL_CONFLICT"
    assert await _code(_decide(ledger, reviewer=ALICE, decision="reject")) == "APPROVAL_CONFLICT"


@pytest.mark.parametrize(
    "reviewer",
    [Reviewer(""), Reviewer("   "), Reviewer(7), Reviewer("a", 7), "reviewer-a"],  # type: ignore[arg-type]
)
async def test_reviewer_is_checked_first(store: AtomicStore, reviewer: Any) -> None:
    # Nothing is stored at all: the reviewer problem still wins over APPROVAL_NOT_FOUND.
    assert await _code(_decide(_ledger(store), reviewer=reviewer)) == "APPROVAL_VALIDATION_ERROR"


async def test_check_order_integrity_before_stale_before_conflict(store: AtomicStore) -> None:
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    await _decide(ledger)
    # Decided and a stale hash: stale wins (the reviewer saw other content).
    assert await _code(_decide(ledger, "0" * 64, reviewer=BOB)) == "APPROVAL_STALE_DECISION"
    # Corrupt and a stale hash: integrity wins.
    await tamper(store, request.id, lambda row: row["request"].update(boundary="t9:call-9"))
    assert await _code(_decide(ledger, "0" * 64)) == "APPROVAL_INTEGRITY_ERROR"


@pytest.mark.parametrize(
    "edit",
    [
        lambda row: row["request"]["content"]["rawInput"].update(amount="7000"),
        lambda row: row["request"].update(requestHash="1" * 64),
        lambda row: row["request"].update(runId="run-2"),
        lambda row: row["request"].update(scope="task_dispatch"),
    ],
    ids=["content", "hash", "run", "scope"],
)
async def test_a_tampered_request_is_refused_on_get_and_decide(
    store: AtomicStore, edit: Any
) -> None:
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    await tamper(store, request.id, edit)
    before = await store.get(approval_key(request.id))
    assert await _code(ledger.get(request.id)) == "APPROVAL_INTEGRITY_ERROR"
    assert await _code(_decide(ledger)) == "APPROVAL_INTEGRITY_ERROR"
    assert await store.get(approval_key(request.id)) == before


async def test_a_consistently_rehashed_tamper_is_a_mis_keyed_row(store: AtomicStore) -> None:
    """Editing content and recomputing hash and id still fails: the id is the key."""
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)

    def rehash(row: dict[str, Any]) -> None:
        stored_request = row["request"]
        stored_request["content"]["rawInput"]["amount"] = "7000"
        digest = hash_approval_request("tool_call", "t1:call-1", stored_request["content"])
        stored_request["requestHash"] = digest
        stored_request["id"] = approval_request_id("run-1", "tool_call", "t1:call-1", digest)

    await tamper(store, request.id, rehash)
    with pytest.raises(DurableApprovalError, match="holds request"):
        await ledger.get(request.id)
    assert await _code(_decide(ledger)) == "APPROVAL_INTEGRITY_ERROR"


async def test_stale_decision_writes_nothing(store: AtomicStore) -> None:
    ledger = _ledger(store)
    request = tool_request()
    created = await ledger.ensure_request(request)
    stale = hash_approval_request("tool_call", "t1:call-1", {"kind": "tool_call"})
    with pytest.raises(DurableApprovalError, match="changed after review"):
        await _decide(ledger, stale)
    assert await ledger.get(request.id) == created


async def test_an_identical_repeat_decision_is_answered_idempotently(store: AtomicStore) -> None:
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    first = await _decide(ledger, reviewer=ALICE)
    later = DurableApprovalLedger(store, now=lambda: datetime(2030, 1, 1, tzinfo=UTC))
    again = await _decide(later, reviewer=Reviewer(" reviewer-a ", "Another name"))
    assert again == first
    assert (await store.get(approval_key(request.id))).value == first.raw  # type: ignore[union-attr]

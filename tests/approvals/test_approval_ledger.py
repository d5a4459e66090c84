"""The approval ledger (AP-11..AP-17): T-51, T-52, requests, reads, records and listing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from approval_helpers import dispatch_request, stored, tamper, tool_request
from ledger_helpers import DECIDED_AT, _code, _decide, _ledger

from oma_actors.approvals import (
    approval_key,
    get_approval_record,
    request_to_json,
)
from oma_actors.approvals.canonical import ordered_json
from oma_actors.domain.approvals import Reviewer
from oma_actors.errors import DurableApprovalError
from oma_actors.stores.base import AtomicStore


async def test_t51_ensure_request_is_idempotent_but_refuses_a_different_request(
    store: AtomicStore,
) -> None:
    ledger = _ledger(store)
    request = tool_request()
    first = await ledger.ensure_request(request)
    second = await ledger.ensure_request(request)
    assert first == second
    assert first.request == request
    assert first.decision is None
    row = await stored(store, request.id)
    assert row == {"version": 1, "request": request_to_json(request)}
    assert first.raw == ordered_json(row)  # JSON.stringify order, as OMA writes rows
    other_reason = replace(request, reason="Another reason")
    assert await _code(ledger.ensure_request(other_reason)) == "APPROVAL_CONFLICT"
    later = replace(request, requested_at=DECIDED_AT)
    assert await _code(ledger.ensure_request(later)) == "APPROVAL_CONFLICT"
    assert await stored(store, request.id) == row


async def test_ensure_request_returns_an_existing_decision(store: AtomicStore) -> None:
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    decided = await _decide(ledger)
    assert await ledger.ensure_request(request) == decided


async def test_ensure_request_verifies_the_request_before_writing(store: AtomicStore) -> None:
    forged = replace(tool_request(), content={**tool_request().content, "toolName": "rm_rf"})
    assert await _code(_ledger(store).ensure_request(forged)) == "APPROVAL_INTEGRITY_ERROR"
    assert await store.list() == []


async def test_t52_get(store: AtomicStore) -> None:
    ledger = _ledger(store)
    request, other = tool_request(), dispatch_request()
    assert await ledger.get(request.id) is None
    await store.set(approval_key(request.id), "{not json")
    assert await _code(ledger.get(request.id)) == "APPROVAL_INTEGRITY_ERROR"
    await ledger.ensure_request(other)
    moved = await store.get(approval_key(other.id))
    assert moved is not None
    await store.set(approval_key(request.id), moved.value)  # a valid record, under another id
    with pytest.raises(DurableApprovalError, match=f"holds request {other.id}") as caught:
        await ledger.get(request.id)
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"version":2,"request":{}}',
        '{"version":true,"request":{}}',
        '{"version":1,"request":{"version":1,"amount":NaN}}',
        '{"version":1}',
    ],
)
async def test_t52_invalid_records_are_integrity_errors(store: AtomicStore, text: str) -> None:
    await store.set(approval_key("apr_" + "0" * 32), text)
    assert await _code(_ledger(store).get("apr_" + "0" * 32)) == "APPROVAL_INTEGRITY_ERROR"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(decision="pending"), "not 'approved' or 'rejected'"),
        (lambda d: d.update(reviewer={"id": " "}), "reviewer id"),  # VALIDATION when parsed alone
        (lambda d: d.update(runId="run-2"), "does not bind"),
    ],
)
async def test_an_invalid_stored_decision_is_an_integrity_error(
    store: AtomicStore, edit: Any, message: str
) -> None:
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    await _decide(ledger)
    await tamper(store, request.id, lambda row: edit(row["decision"]))
    with pytest.raises(DurableApprovalError, match=message) as caught:
        await ledger.get(request.id)
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"


async def test_decision_record_and_metadata(store: AtomicStore) -> None:
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    entry = await store.get(approval_key(request.id))
    assert entry is not None
    assert entry.metadata == {
        "namespace": "approval",
        "version": 1,
        "runId": "run-1",
        "scope": "tool_call",
        "requestHash": request.request_hash,
        "requestedAt": "2026-01-02T03:04:05.678Z",
    }
    record = await _decide(ledger, decision="reject", reviewer=Reviewer("  reviewer-b  "))
    row = await stored(store, request.id)
    assert row["request"] == request_to_json(request)
    assert row["decision"] == {
        "version": 1,
        "requestId": request.id,
        "runId": "run-1",
        "scope": "tool_call",
        "requestHash": request.request_hash,
        "decision": "rejected",
        "reviewer": {"id": "reviewer-b"},
        "decidedAt": "2026-02-03T04:05:06.789Z",
    }
    entry = await store.get(approval_key(request.id))
    assert entry is not None
    assert entry.value == record.raw
    assert entry.metadata == {
        "namespace": "approval",
        "version": 1,
        "runId": "run-1",
        "scope": "tool_call",
        "requestHash": request.request_hash,
        "decision": "rejected",
        "reviewerId": "reviewer-b",
        "decidedAt": "2026-02-03T04:05:06.789Z",
    }


async def test_list_skips_other_keys_and_filters_by_run(store: AtomicStore) -> None:
    ledger = _ledger(store)
    first, second = tool_request(run_id="run-1"), dispatch_request(run_id="run-2")
    await store.set("__oma_checkpoint__/run-1/latest", "{}")
    await store.set("agent/notes", "not an approval")
    await ledger.ensure_request(first)
    await ledger.ensure_request(second)
    assert [r.request.id for r in await ledger.list()] == [first.id, second.id]
    assert [r.request for r in await ledger.list(run_id="run-2")] == [second]
    assert await ledger.list(run_id="run-3") == []
    await store.set(approval_key("apr_" + "1" * 32), "{")
    assert await _code(ledger.list()) == "APPROVAL_INTEGRITY_ERROR"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_non_json_number_literals_are_not_json(store: AtomicStore, constant: str) -> None:
    request = tool_request()
    await _ledger(store).ensure_request(request)
    entry = await store.get(approval_key(request.id))
    assert entry is not None
    assert entry.value.startswith('{"version":1,')
    await store.set(entry.key, entry.value.replace('{"version":1,', f'{{"x":{constant},', 1))
    with pytest.raises(DurableApprovalError, match="is not valid JSON"):
        await get_approval_record(store, request.id)


async def test_list_never_reads_another_kind_of_value() -> None:
    # On an encrypting store a value that does not open (another key's, a corrupt one) fails a
    # read of it; the ledger lists its rows' prefix only, so such a value elsewhere never
    # fails the approvals' listing (nor the sidecar's deletions and retention built on it).
    from oma_actors.stores import EncryptingStore, InMemoryStore, KeyRing

    inner = InMemoryStore()
    store = EncryptingStore(inner, KeyRing({"k1": bytes(range(32))}, active="k1"))
    ledger = _ledger(store)
    request = tool_request(run_id="run-1")
    await ledger.ensure_request(request)
    await inner.set("__oma_checkpoint__/other/latest", "oma-sealed:v1:kx:not-a-value")
    assert [r.request.id for r in await ledger.list()] == [request.id]

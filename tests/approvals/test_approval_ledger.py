"""The approval ledger (AP-11..AP-17): T-31..T-33 and T-51..T-53, on InMemoryStore and FileStore."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from approval_helpers import dispatch_request, stored, tamper, tool_request

from oma_actors.approvals import (
    ApprovalRecord,
    DurableApprovalLedger,
    approval_key,
    approval_request_id,
    decide_approval,
    get_approval_record,
    hash_approval_request,
    request_to_json,
    stable_json,
)
from oma_actors.domain.approvals import Reviewer
from oma_actors.errors import DurableApprovalError
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.stores.base import AtomicStore, MemoryEntry
from oma_actors.stores.redacting import RedactingStore

DECIDED_AT = datetime(2026, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
ALICE = Reviewer("reviewer-a", "Alice")
BOB = Reviewer("reviewer-b")


@pytest.fixture(params=["memory", "file"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AtomicStore]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        async with FileStore.open(tmp_path / "state.json") as file_store:
            yield file_store


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


# --- T-31..T-33 ---------------------------------------------------------------------------


async def test_t31_stale_hash_then_one_of_two_concurrent_decisions_wins(store: AtomicStore) -> None:
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    assert await _code(_decide(ledger, "0" * 64)) == "APPROVAL_STALE_DECISION"
    outcomes = await asyncio.gather(
        _decide(ledger, reviewer=ALICE, decision="approve"),
        _decide(ledger, reviewer=BOB, decision="reject"),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if isinstance(o, ApprovalRecord)]
    losses = [o for o in outcomes if isinstance(o, DurableApprovalError)]
    assert len(wins) == 1
    assert [loss.code for loss in losses] == ["APPROVAL_CONFLICT"]
    record = await get_approval_record(store, request.id)
    assert record is not None
    assert record.decision is not None
    assert record.decision == wins[0].decision
    assert record.decision.decision == "approved"
    assert record.decision.reviewer == ALICE
    assert record.decision.decided_at == DECIDED_AT


async def test_t32_tampered_tool_name_is_an_integrity_error(store: AtomicStore) -> None:
    request = tool_request()
    await _ledger(store).ensure_request(request)
    await tamper(store, request.id, lambda row: row["request"]["content"].update(toolName="rm_rf"))
    assert await _code(get_approval_record(store, request.id)) == "APPROVAL_INTEGRITY_ERROR"


class _PlainStore:
    """A store with the five required methods and no compare_and_set."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    async def get(self, key: str) -> MemoryEntry | None:
        return await self.inner.get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        await self.inner.set(key, value, metadata)

    async def list(self) -> list[MemoryEntry]:
        return await self.inner.list()

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def clear(self) -> None:
        await self.inner.clear()


@pytest.mark.parametrize("make", [lambda: RedactingStore(InMemoryStore()), _PlainStore])
async def test_t33_a_store_without_compare_and_set_is_refused(make: Any) -> None:
    no_cas = make()
    with pytest.raises(DurableApprovalError) as caught:
        DurableApprovalLedger(cast("AtomicStore", no_cas))
    assert caught.value.code == "APPROVAL_ATOMIC_STORE_REQUIRED"
    request = tool_request()
    code = await _code(
        decide_approval(
            no_cas,
            request_id=request.id,
            request_hash=request.request_hash,
            decision="approve",
            reviewer=ALICE,
        )
    )
    assert code == "APPROVAL_ATOMIC_STORE_REQUIRED"
    assert await no_cas.list() == []
    # Reading needs no compare-and-set.
    assert await get_approval_record(no_cas, request.id) is None


# --- T-51..T-53 ---------------------------------------------------------------------------


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
    assert first.raw == stable_json(row)
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


# --- races -----------------------------------------------------------------------------------


class _RacingStore(InMemoryStore):
    """Holds every ``get`` until two are waiting, so two deciders read the same undecided row."""

    def __init__(self) -> None:
        super().__init__()
        self.racing = False
        self._waiting = 0
        self._both_read = asyncio.Event()

    async def get(self, key: str) -> MemoryEntry | None:
        entry = await super().get(key)
        if self.racing and not self._both_read.is_set():
            self._waiting += 1
            if self._waiting == 2:
                self._both_read.set()
            await self._both_read.wait()
        return entry


async def test_a_lost_compare_and_set_is_decided_concurrently() -> None:
    store = _RacingStore()
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    store.racing = True
    outcomes = await asyncio.gather(
        _decide(ledger, reviewer=ALICE, decision="approve"),
        _decide(ledger, reviewer=BOB, decision="reject"),
        return_exceptions=True,
    )
    [winner] = [o for o in outcomes if isinstance(o, ApprovalRecord)]
    [loser] = [o for o in outcomes if isinstance(o, DurableApprovalError)]
    assert loser.code == "APPROVAL_CONFLICT"
    assert "decided concurrently" in str(loser)
    assert await ledger.get(request.id) == winner


async def test_identical_concurrent_decisions_both_get_the_winner() -> None:
    store = _RacingStore()
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    store.racing = True
    first, second = await asyncio.gather(_decide(ledger), _decide(ledger))
    assert first == second == await ledger.get(request.id)


async def test_one_file_store_instance_lets_exactly_one_of_many_deciders_win(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    request = tool_request()
    async with FileStore.open(path) as store:
        ledger = _ledger(store)
        await ledger.ensure_request(request)
        reviewers = [Reviewer(f"reviewer-{n}") for n in range(8)]
        outcomes = await asyncio.gather(
            *(_decide(ledger, reviewer=r, decision="reject") for r in reviewers),
            return_exceptions=True,
        )
    wins = [o for o in outcomes if isinstance(o, ApprovalRecord)]
    assert len(wins) == 1
    assert all(
        isinstance(o, DurableApprovalError) and o.code == "APPROVAL_CONFLICT"
        for o in outcomes
        if o not in wins
    )
    async with FileStore.open(path) as fresh:
        record = await get_approval_record(fresh, request.id)
    assert record == wins[0]
    document = json.loads(await asyncio.to_thread(path.read_text))
    assert [entry["key"] for entry in document["entries"]] == [approval_key(request.id)]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_non_json_number_literals_are_not_json(store: AtomicStore, constant: str) -> None:
    request = tool_request()
    await _ledger(store).ensure_request(request)
    entry = await store.get(approval_key(request.id))
    assert entry is not None
    await store.set(entry.key, entry.value.replace('"version":1}', f'"version":1,"x":{constant}}}'))
    with pytest.raises(DurableApprovalError, match="is not valid JSON"):
        await get_approval_record(store, request.id)

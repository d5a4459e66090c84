"""The approval ledger and compare-and-set (AP-12, AP-17): T-31, T-33, concurrent deciders."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import pytest
from approval_helpers import tool_request
from ledger_helpers import ALICE, BOB, DECIDED_AT, _code, _decide, _ledger

from oma_actors.approvals import (
    ApprovalRecord,
    DurableApprovalLedger,
    approval_key,
    decide_approval,
    get_approval_record,
)
from oma_actors.domain.approvals import Reviewer
from oma_actors.errors import DurableApprovalError
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.stores.base import AtomicStore
from oma_actors.stores.redacting import RedactingStore
from oma_actors.testing import MinimalStore, RendezvousStore


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


@pytest.mark.parametrize("make", [lambda: RedactingStore(InMemoryStore()), MinimalStore])
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


# --- races -----------------------------------------------------------------------------------


async def test_a_lost_compare_and_set_is_decided_concurrently() -> None:
    # Once armed, both deciders read the same undecided row before either writes.
    store = RendezvousStore(InMemoryStore())
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    store.armed = True
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
    # Once armed, both deciders read the same undecided row before either writes.
    store = RendezvousStore(InMemoryStore())
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    store.armed = True
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

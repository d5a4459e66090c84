"""The approval ledger and compare-and-set (AP-12, AP-17): T-31, T-33, concurrent deciders."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
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
from oma_actors.testing.forwarding import ForwardingStore


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


class _Meddling(ForwardingStore):
    """Runs ``meddle`` on the inner store just before the next compare-and-set (once): what
    another writer did between the ledger's read and its write."""

    def __init__(self, inner: InMemoryStore) -> None:
        super().__init__(inner)
        self.meddle: Callable[[InMemoryStore], Awaitable[None]] | None = None

    async def _compare_and_set(
        self, key: str, expected: str | None, value: str, metadata: Any = None
    ) -> bool:
        meddle, self.meddle = self.meddle, None
        if meddle is not None:
            await meddle(cast("InMemoryStore", self.inner))
        return await super()._compare_and_set(key, expected, value, metadata)


async def test_a_request_row_that_vanishes_between_write_and_read_is_a_conflict() -> None:
    # Another writer holds the id at the ledger's compare-and-set, then the row is removed
    # before the ledger reads it: a typed conflict, not a crash on the missing row.
    inner = InMemoryStore()
    store = _Meddling(inner)
    request = tool_request()
    key = approval_key(request.id)

    async def taken_then_removed(raw: InMemoryStore) -> None:
        await raw.set(key, "someone else's", None)
        real_get = raw.get

        async def get_once_gone(k: str) -> Any:
            if k == key:
                await raw.delete(key)
            return await real_get(k)

        raw.get = get_once_gone  # type: ignore[method-assign]

    store.meddle = taken_then_removed
    assert await _code(_ledger(store).ensure_request(request)) == "APPROVAL_CONFLICT"


@pytest.mark.parametrize("winner", ["removed", "undecided"])
async def test_a_decision_that_loses_to_a_write_without_a_decision_is_a_conflict(
    winner: str,
) -> None:
    # The row changed between the ledger's verified read and its compare-and-set, and what is
    # there now is no decision to repeat or refuse: a typed conflict, the store left as it is.
    inner = InMemoryStore()
    store = _Meddling(inner)
    ledger = _ledger(store)
    request = tool_request()
    await ledger.ensure_request(request)
    key = approval_key(request.id)
    entry = await inner.get(key)
    assert entry is not None

    async def rewrite(raw: InMemoryStore) -> None:
        if winner == "removed":
            await raw.delete(key)
        else:  # the same undecided row, written again with its members in another order
            row = json.loads(entry.value)
            await raw.set(key, json.dumps(dict(reversed(list(row.items())))), entry.metadata)

    store.meddle = rewrite
    assert await _code(_decide(ledger)) == "APPROVAL_CONFLICT"
    after = await inner.get(key)
    assert (
        (after is None)
        if winner == "removed"
        else (after is not None and "decision" not in after.value)
    )

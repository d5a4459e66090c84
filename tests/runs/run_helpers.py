"""Helpers shared by the run-store tests: a start time, record and ledger builders, error codes."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

import pytest

from oma_actors.errors import LeaseError
from oma_actors.runs import Lease, MemoryStoreRunStore, RunLedger, RunRecord
from oma_actors.stores.base import AtomicStore
from oma_actors.testing import FakeClock

START = datetime(2026, 9, 1, tzinfo=UTC)
"""Where every fake clock of these tests starts (the golden records' time)."""


def record(**changes: Any) -> RunRecord:
    """A valid running record of ``run-1`` at ``START``, with ``changes`` applied."""
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "version": 1,
        "status": "running",
        "attempt": 1,
        "fencing_token": 1,
        "lease": Lease("worker-a", START, START),
        "created_at": START,
        "updated_at": START,
    }
    fields.update(changes)
    return RunRecord(**fields)


def ledger(
    store: AtomicStore, clock: FakeClock, owner: str, *, lease_ttl: float = 60.0
) -> RunLedger:
    """A ledger of ``owner`` over ``store`` driven by ``clock``."""
    return RunLedger(MemoryStoreRunStore(store), owner=owner, lease_ttl=lease_ttl, clock=clock.unix)


async def code_of(awaitable: Awaitable[object]) -> str:
    """The ``LeaseError`` code ``awaitable`` raises (fails the test if it raises none)."""
    with pytest.raises(LeaseError) as caught:
        await awaitable
    return caught.value.code


def code_of_call(call: Any, *args: Any, **kwargs: Any) -> str:
    """The ``LeaseError`` code a synchronous ``call(*args, **kwargs)`` raises."""
    with pytest.raises(LeaseError) as caught:
        call(*args, **kwargs)
    return caught.value.code

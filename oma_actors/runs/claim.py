"""What one lease handle knows about its ownership, and the one way it writes (RS-09).

A ``Claim`` holds the latest record the handle saw, the latched loss and the lock that
serialises the handle's writes. Every write reads the record, checks that it still carries the
handle's fencing token and owner, and swaps it by version; a record that does not is a loss,
latched on first sight: from then on every command raises that same error without touching the
store, because a fenced-out worker must not race the new owner even once more.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.errors import LeaseError
from oma_actors.runs.lifecycle import CONFLICT, LEASE_LOST

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from oma_actors.runs.record import RunRecord
    from oma_actors.runs.store import RunStore

    Build = Callable[[RunRecord, datetime], RunRecord | None]
    """Builds the next record from the current one and now; ``None``: nothing to write."""

CAS_RETRIES = 5
"""Retries of a compare-and-set lost to contention before ``RUN_CONFLICT`` (RS-06)."""


@dataclass(frozen=True, slots=True)
class LeaseTerms:
    """What a ledger hands its leases: the store, the owner, the TTL and the clock."""

    run_store: RunStore
    owner: str
    ttl_ms: int
    now: Callable[[], datetime]


class Claim:
    """The ownership state of one handle.

    Args:
        terms: The ledger's store, owner, TTL and clock.
        record: The record the acquisition wrote.
        on_latch: Called once, with the error, when the loss latches.
    """

    def __init__(
        self, terms: LeaseTerms, record: RunRecord, on_latch: Callable[[LeaseError], None]
    ) -> None:
        self.terms = terms
        self.record = record
        self.run_id = record.run_id
        self.fencing_token = record.fencing_token
        # A record keeps its createdAt for life; a deleted and re-created run starts its token
        # over at 1, so the token alone cannot tell this handle's record from the new one.
        self.created_at = record.created_at
        self.lost: LeaseError | None = None
        self.lost_event = asyncio.Event()
        self.lock = asyncio.Lock()
        self._on_latch = on_latch

    def raise_if_lost(self) -> None:
        """Raise the latched loss, if there is one."""
        if self.lost is not None:
            raise self.lost

    def latch(self, error: LeaseError) -> LeaseError:
        """Latch ``error`` as the loss unless one is latched already; return the latched one."""
        if self.lost is not None:
            return self.lost
        self.lost = error
        self.lost_event.set()
        self._on_latch(error)
        return error

    def at_token(self, record: RunRecord | None) -> bool:
        """Whether ``record`` is the record this claim acquired at its fencing token: the same
        life of the run (a record deleted and created anew starts its token over at 1)."""
        return (
            record is not None
            and record.fencing_token == self.fencing_token
            and record.created_at == self.created_at
        )

    def owned(self, record: RunRecord | None) -> RunRecord:
        """``record`` if it is the record this claim acquired, at its token and with its lease;
        else latch and raise."""
        owner = self.terms.owner
        if record is None:
            problem = "has no record any more"
        elif record.fencing_token != self.fencing_token:
            problem = (
                f"moved to fencing token {record.fencing_token}; "
                f"this handle holds {self.fencing_token}"
            )
        elif record.created_at != self.created_at:
            problem = "was deleted and created anew"
        elif record.lease is None or record.lease.owner != owner:
            problem = f"is no longer leased by {owner!r}"
        else:
            return record
        raise self.latch(LeaseError(LEASE_LOST, f"run {self.run_id!r} {problem}", record))

    async def verified(self) -> RunRecord:
        """The stored record if it is still ours; otherwise latch and raise the loss."""
        return self.owned(await self.terms.run_store.get(self.run_id))

    async def write(self, build: Build) -> RunRecord:
        """Read, check the fence, swap by version, with bounded retries; the lock is held.

        Raises:
            LeaseError: the latched ``RUN_LEASE_LOST``, or ``RUN_CONFLICT``.
        """
        self.raise_if_lost()
        for _ in range(CAS_RETRIES + 1):
            current = await self.verified()
            self.record = current
            nxt = build(current, self.terms.now())
            if nxt is None:
                return current
            if await self.terms.run_store.compare_and_set(self.run_id, current.version, nxt):
                self.record = nxt
                return nxt
        raise LeaseError(
            CONFLICT, f"run {self.run_id!r} stayed contended after {CAS_RETRIES} retries"
        )

    async def confirm(self) -> bool:
        """Re-read the record: ``True`` when it is lost (latched); else adopt the stored copy.

        The lock is held by the caller.
        """
        try:
            self.record = await self.verified()
        except LeaseError as error:
            if error is self.lost:
                return True
            raise
        return False

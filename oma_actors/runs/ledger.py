"""``RunLedger``: issues, reclaims and revokes run leases (RS-05..RS-08).

One ledger is one worker: its ``owner`` is stamped on every lease it takes, so a second worker
is a second ledger (usually a second process). Like the approval ledger, every write is a
compare-and-set on the record's version and nothing is best-effort: a contended write is retried
a bounded number of times (five retries, as OMA) and then refused with ``RUN_CONFLICT``, and a
refusal always says why (``LeaseError.code``) and what it saw (``LeaseError.record``).

``acquire`` returns something that can be awaited or entered::

    handle = await ledger.acquire("run-1")     # the caller closes it: complete(), release(), ...
    async with ledger.acquire("run-1") as handle:
        ...                                    # left open at exit: released (queued)
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import uuid
from typing import TYPE_CHECKING, Any

from oma_actors.errors import LeaseError
from oma_actors.runs import transitions as tx
from oma_actors.runs.claim import CAS_RETRIES, LeaseTerms
from oma_actors.runs.fields import from_ms, iso_ms
from oma_actors.runs.handle import RunLeaseHandle
from oma_actors.runs.lifecycle import (
    ALREADY_TERMINAL,
    CONFLICT,
    LEASE_HELD,
    NOT_FOUND,
    SUSPENDED,
    VALIDATION,
    check_transition,
    is_terminal,
)
from oma_actors.runs.record import lease_live

if TYPE_CHECKING:
    from collections.abc import Callable, Generator
    from datetime import datetime
    from types import TracebackType

    from oma_actors.runs.record import RunRecord
    from oma_actors.runs.store import RunStore

DEFAULT_LEASE_TTL = 60.0
"""Seconds a lease stays valid without renewal (OMA's 60 000 ms)."""


def default_owner() -> str:
    """A fresh worker identity: ``oma-worker-<pid>-<8 random hex>`` (RS-05)."""
    return f"oma-worker-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def lease_ttl_ms(lease_ttl: float) -> int:
    """``lease_ttl`` seconds as whole milliseconds (RS-05: it must be a positive number).

    Raises:
        LeaseError: ``RUN_VALIDATION_ERROR`` for a non-number, zero, negative or non-finite.
    """
    if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, int | float):
        raise LeaseError(VALIDATION, f"lease_ttl must be a number of seconds, got {lease_ttl!r}")
    if not math.isfinite(lease_ttl) or lease_ttl <= 0:
        raise LeaseError(VALIDATION, f"lease_ttl must be positive and finite, got {lease_ttl!r}")
    return max(1, round(lease_ttl * 1000))


def check_owner(owner: str) -> str:
    """``owner`` if it is a non-blank string (RS-05).

    Raises:
        LeaseError: ``RUN_VALIDATION_ERROR`` otherwise.
    """
    if not isinstance(owner, str) or not owner.strip():
        raise LeaseError(VALIDATION, f"a lease owner must be a non-blank string, got {owner!r}")
    return owner


class RunLedger:
    """Issues, renews and reclaims the leases of one worker over a ``RunStore``.

    Args:
        run_store: Where the run records live.
        owner: This worker's identity; two live workers must never share one. Default: a
            fresh ``oma-worker-<pid>-<hex>`` per ledger.
        lease_ttl: Seconds a lease lasts without renewal (default 60).
        clock: Returns the current Unix time in seconds (e.g. ``FakeClock().unix``); default
            ``time.time``.

    Raises:
        LeaseError: ``RUN_VALIDATION_ERROR`` for a blank owner or a TTL that is not positive.
    """

    def __init__(
        self,
        run_store: RunStore,
        *,
        owner: str | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.run_store = run_store
        self.owner = check_owner(default_owner() if owner is None else owner)
        self.lease_ttl = lease_ttl
        self._clock = time.time if clock is None else clock
        self._terms = LeaseTerms(run_store, self.owner, lease_ttl_ms(lease_ttl), self.now)

    def now(self) -> datetime:
        """The clock's current time, to the millisecond."""
        return from_ms(round(self._clock() * 1000))

    async def get(self, run_id: str) -> RunRecord | None:
        """Read the record of ``run_id`` without taking ownership (``None``: unknown run)."""
        return await self.run_store.get(run_id)

    def acquire(
        self,
        run_id: str,
        *,
        heartbeat: bool = True,
        on_lost: Callable[[LeaseError], None] | None = None,
    ) -> Acquisition:
        """Become the single owner of ``run_id``, creating its record if it is new (RS-06).

        Await the result for a ``RunLeaseHandle``, or enter it with ``async with``. An awaited
        handle is the caller's to close (a closing command or ``aclose``): until then its
        heartbeat keeps renewing the lease.

        Args:
            run_id: The run; must not be blank.
            heartbeat: Renew in the background while the handle is open (RS-11).
            on_lost: Called once, synchronously, when the handle latches a loss.

        Raises:
            LeaseError: ``RUN_VALIDATION_ERROR`` (blank id), ``RUN_ALREADY_TERMINAL``,
                ``RUN_SUSPENDED`` (``request_resume`` first), ``RUN_LEASE_HELD`` (another
                owner's lease is live) or ``RUN_CONFLICT`` (still contended after 5 retries).
        """
        return Acquisition(self, run_id, heartbeat=heartbeat, on_lost=on_lost)

    async def _acquire(self, run_id: str) -> RunRecord:
        if not isinstance(run_id, str) or not run_id.strip():
            raise LeaseError(VALIDATION, f"a run lease needs a non-blank run id, got {run_id!r}")
        ttl_ms = self._terms.ttl_ms
        for _ in range(CAS_RETRIES + 1):
            now = self.now()
            current = await self.run_store.get(run_id)
            if current is None:
                first = tx.created(run_id, self.owner, now, ttl_ms)
                if await self.run_store.create(first):
                    return first
                continue
            if is_terminal(current.status):
                raise LeaseError(
                    ALREADY_TERMINAL, f"run {run_id!r} already ended as {current.status}", current
                )
            if current.status == "suspended":
                raise LeaseError(
                    SUSPENDED, f"run {run_id!r} is suspended; request_resume it first", current
                )
            lease = current.lease
            if lease is not None and lease_live(current, now) and lease.owner != self.owner:
                until = iso_ms(lease.expires_at)
                raise LeaseError(
                    LEASE_HELD,
                    f"run {run_id!r} is leased by {lease.owner!r} until {until}",
                    current,
                )
            if current.status != "running":
                check_transition(run_id, current.status, "running")
            taken = tx.acquired(current, self.owner, now, ttl_ms)
            if await self.run_store.compare_and_set(run_id, current.version, taken):
                return taken
        raise LeaseError(
            CONFLICT, f"run {run_id!r} lease stayed contended after {CAS_RETRIES} retries"
        )

    async def request_resume(self, run_id: str) -> RunRecord:
        """Make a suspended or abandoned run eligible for a new lease (RS-07).

        Queued already: returned unchanged (repeat-safe). Otherwise queued, lease and
        suspension cleared.

        Raises:
            LeaseError: ``RUN_NOT_FOUND``, ``RUN_ALREADY_TERMINAL``, ``RUN_LEASE_HELD`` (running
                under a live lease, whoever holds it) or ``RUN_CONFLICT``.
        """

        def build(current: RunRecord, now: datetime) -> RunRecord | None:
            if current.status == "queued":
                return None
            if is_terminal(current.status):
                raise LeaseError(
                    ALREADY_TERMINAL, f"run {run_id!r} already ended as {current.status}", current
                )
            if current.status == "running" and lease_live(current, now):
                raise LeaseError(
                    LEASE_HELD, f"run {run_id!r} is still running under a lease", current
                )
            check_transition(run_id, current.status, "queued")
            return tx.resumed(current, now)

        return await self._mutate(run_id, build)

    async def cancel(
        self, run_id: str, message: str | None = None, *, unless_held: bool = False
    ) -> RunRecord:
        """Cancel a run from outside its worker (RS-08); the holder is fenced out.

        Already cancelled: returned unchanged. Otherwise cancelled, lease dropped, fencing token
        + 1, ``outcome = {"code": "cancelled", "message"?}``.

        Args:
            run_id: The run.
            message: The outcome's message.
            unless_held: Refuse a run another owner holds a live lease of instead of fencing it
                out (a caller that cancels only runs nobody executes), decided in the same
                compare-and-set as the cancel.

        Raises:
            LeaseError: ``RUN_NOT_FOUND``, ``RUN_ALREADY_TERMINAL``, ``RUN_LEASE_HELD`` (with
                ``unless_held``) or ``RUN_CONFLICT``.
        """

        def build(current: RunRecord, now: datetime) -> RunRecord | None:
            if current.status == "cancelled":
                return None
            if is_terminal(current.status):
                raise LeaseError(
                    ALREADY_TERMINAL, f"run {run_id!r} already ended as {current.status}", current
                )
            lease = current.lease
            held = lease is not None and lease.owner != self.owner and lease_live(current, now)
            if unless_held and held:
                owner = lease.owner if lease is not None else ""
                raise LeaseError(LEASE_HELD, f"run {run_id!r} is leased by {owner!r}", current)
            check_transition(run_id, current.status, "cancelled")
            return tx.cancelled(current, message, now)

        return await self._mutate(run_id, build)

    async def _mutate(
        self, run_id: str, build: Callable[[RunRecord, datetime], RunRecord | None]
    ) -> RunRecord:
        """Read, build, compare-and-set, with bounded retries; ``None`` means "already so"."""
        for _ in range(CAS_RETRIES + 1):
            current = await self.run_store.get(run_id)
            if current is None:
                raise LeaseError(NOT_FOUND, f"run {run_id!r} has no record")
            nxt = build(current, self.now())
            if nxt is None:
                return current
            if await self.run_store.compare_and_set(run_id, current.version, nxt):
                return nxt
        raise LeaseError(CONFLICT, f"run {run_id!r} stayed contended after {CAS_RETRIES} retries")


class Acquisition:
    """The pending result of ``RunLedger.acquire``: await it, or use it as ``async with``.

    Entered, it releases the run at exit if the handle is still open (not completed, failed,
    cancelled, suspended, released, closed or lost), and always stops the heartbeat.
    """

    def __init__(
        self,
        ledger: RunLedger,
        run_id: str,
        *,
        heartbeat: bool,
        on_lost: Callable[[LeaseError], None] | None,
    ) -> None:
        self._ledger = ledger
        self._run_id = run_id
        self._heartbeat = heartbeat
        self._on_lost = on_lost
        self._handle: RunLeaseHandle | None = None

    async def _open(self) -> RunLeaseHandle:
        record = await self._ledger._acquire(self._run_id)
        handle = RunLeaseHandle(self._ledger._terms, record, on_lost=self._on_lost)
        if self._heartbeat:
            handle.start_heartbeat()
        return handle

    def __await__(self) -> Generator[Any, None, RunLeaseHandle]:
        return self._open().__await__()

    async def __aenter__(self) -> RunLeaseHandle:
        self._handle = await self._open()
        return self._handle

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        handle = self._handle
        assert handle is not None
        if handle.closed or handle.lost is not None:
            await handle.aclose()
            return
        if exc is None:
            await handle.release()
            return
        # The body's own error is the one to report; a release refused on the way out (lost,
        # contended) must not replace it. The handle has stopped renewing either way.
        with contextlib.suppress(LeaseError):
            await handle.release()

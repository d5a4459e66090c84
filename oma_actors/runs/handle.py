"""``RunLeaseHandle``: the capability a worker holds while it owns a run (RS-09..RS-11, D11).

Every command re-reads the record and writes only if it still carries this handle's fencing
token and owner (``claim.py``); otherwise the handle is *lost* (``RUN_LEASE_LOST`` with the
record it saw), and the first loss latches. A loss is observable three ways: ``handle.lost``,
``await handle.wait_lost()`` and the ``on_lost`` callback given to ``RunLedger.acquire`` (where
the orchestrator emits ``LeaseLost``). Closing commands (suspend, complete, fail, cancel,
release) converge when repeated and stop the heartbeat. ``fenced`` makes a store write and the
ownership check one operation (``fence.py`` says how the orchestrator uses it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

from oma_actors.errors import LeaseError
from oma_actors.keyspace import run_record_key
from oma_actors.runs import transitions as tx
from oma_actors.runs.claim import Claim, LeaseTerms
from oma_actors.runs.fence import fenced_write
from oma_actors.runs.fields import checkpoint_ref_problem, outcome_problem
from oma_actors.runs.heartbeat import Heartbeat, heartbeat_interval
from oma_actors.runs.lifecycle import LEASE_LOST, VALIDATION, check_transition
from oma_actors.runs.store import MemoryStoreRunStore
from oma_actors.stores.base import Expect, is_conditional_store

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime

    from oma_actors.runs.claim import Build
    from oma_actors.runs.fence import ApplyWrites
    from oma_actors.runs.lifecycle import RunStatus
    from oma_actors.runs.record import RunRecord
    from oma_actors.stores.base import ConditionalStore

logger = logging.getLogger(__name__)


class RunLeaseHandle:
    """The owner's capability over one run; made by ``RunLedger.acquire``, never directly.

    Attributes:
        run_id: The run.
        owner: The ledger's owner, stamped on the lease.
        fencing_token: The token this lease was acquired with; any other token on the record
            means another owner (or an operator) has taken the run.
    """

    def __init__(
        self,
        terms: LeaseTerms,
        record: RunRecord,
        *,
        on_lost: Callable[[LeaseError], None] | None = None,
    ) -> None:
        self.run_id = record.run_id
        self.owner = terms.owner
        self.fencing_token = record.fencing_token
        self._on_lost = on_lost
        self._closed = False
        self._claim = Claim(terms, record, self._latched)
        name = f"oma-lease-heartbeat:{self.run_id}"
        self._heartbeat = Heartbeat(self._beat, heartbeat_interval(terms.ttl_ms), name=name)

    @property
    def record(self) -> RunRecord:
        """The latest record this handle wrote or read."""
        return self._claim.record

    @property
    def attempt(self) -> int:
        """The execution attempt this lease stands for."""
        return self._claim.record.attempt

    @property
    def lost(self) -> LeaseError | None:
        """The latched ``RUN_LEASE_LOST`` once ownership is provably gone, else ``None``."""
        return self._claim.lost

    @property
    def held(self) -> bool:
        """Whether this handle still owns the run as far as it knows."""
        return self._claim.lost is None

    @property
    def closed(self) -> bool:
        """Whether the handle has stopped renewing: a closing command ran, or ``aclose``."""
        return self._closed

    @property
    def heartbeat_running(self) -> bool:
        """Whether the background renewal is running."""
        return self._heartbeat.running

    @property
    def fence_key(self) -> str:
        """The key of the run record every fenced write checks: ``__oma_run__/<runId>``."""
        return run_record_key(self.run_id)

    @property
    def fence_store(self) -> ConditionalStore | None:
        """The store a fenced write must go to, or ``None`` when no such transaction exists.

        That is the backing store of a ``MemoryStoreRunStore`` when it has ``apply``. A write to
        any other store cannot be fenced in one transaction: call ``record_checkpoint`` before
        it (OMA's RS-12 order) and accept that window.
        """
        run_store = self._claim.terms.run_store
        if isinstance(run_store, MemoryStoreRunStore) and is_conditional_store(run_store.store):
            return cast("ConditionalStore", run_store.store)
        return None

    async def wait_lost(self) -> LeaseError:
        """Wait until the lease is lost and return the latched error."""
        await self._claim.lost_event.wait()
        return cast("LeaseError", self._claim.lost)

    # --- commands --------------------------------------------------------------------------

    async def renew(self) -> RunRecord:
        """Extend the lease by the TTL from now (RS-09).

        Raises:
            LeaseError: ``RUN_LEASE_LOST`` (latched) or ``RUN_CONFLICT`` after bounded retries.
        """
        terms = self._claim.terms
        return await self._locked_write(
            lambda current, now: tx.renewed(current, terms.owner, now, terms.ttl_ms)
        )

    async def record_checkpoint(self, ref: Mapping[str, object]) -> RunRecord:
        """Point the record at checkpoint ``ref`` and renew the lease, in one write (RS-09).

        Args:
            ref: OMA's ``{"key", "snapshotVersion", "savedAt"}``.

        Raises:
            LeaseError: ``RUN_VALIDATION_ERROR`` for a malformed ``ref``; ``RUN_LEASE_LOST``
                (latched); ``RUN_CONFLICT``.
        """
        checked = _checked(dict(ref), checkpoint_ref_problem)
        terms = self._claim.terms
        return await self._locked_write(
            lambda current, now: tx.checkpointed(current, checked, terms.owner, now, terms.ttl_ms)
        )

    async def suspend(self, approval_ids: Sequence[str]) -> RunRecord:
        """Record a suspension on ``approval_ids`` and drop the lease (RS-09, RS-10)."""
        ids = list(approval_ids)
        if not all(isinstance(item, str) for item in ids):
            raise LeaseError(VALIDATION, f"approval ids must be strings: {ids!r}")
        return await self._close("suspended", lambda current, now: tx.suspended(current, ids, now))

    async def complete(self, outcome: Mapping[str, object] | None = None) -> RunRecord:
        """Close the run as completed with ``outcome`` (default ``{"code": "ok"}``) (RS-09)."""
        return await self._finish("completed", {"code": "ok"} if outcome is None else outcome)

    async def fail(self, outcome: Mapping[str, object]) -> RunRecord:
        """Close the run as failed with ``outcome`` (``{"code", "message"?}``) (RS-09)."""
        return await self._finish("failed", outcome)

    async def cancel(self, outcome: Mapping[str, object] | None = None) -> RunRecord:
        """Close the run as cancelled by its own worker (default ``{"code": "cancelled"}``)."""
        default = {"code": "cancelled"}
        return await self._finish("cancelled", default if outcome is None else outcome)

    async def release(self) -> RunRecord:
        """Give the run up unfinished: queued, no lease, so another worker may take it at once.

        The next acquisition is not a takeover: the attempt stays (RS-09).
        """
        return await self._close("queued", lambda current, now: tx.released(current, now))

    async def aclose(self) -> None:
        """Stop the heartbeat without writing anything (the lease then runs out on its own)."""
        self._closed = True
        await self._heartbeat.stop()

    def start_heartbeat(self) -> None:
        """Start the background renewal (RS-11); a no-op if started, closed or lost.

        Closing and losing both stop the heartbeat for good, so it cannot start again.
        """
        self._heartbeat.start()

    # --- fencing (D11, see fence.py) -------------------------------------------------------

    async def fenced(
        self, apply: ApplyWrites, *, checkpoint_ref: Mapping[str, object] | None = None
    ) -> bool:
        """Run ``apply(checks, writes)`` with the ownership check, as one store operation.

        Args:
            apply: Applies the given checks and writes together with the caller's own, as one
                ``ConditionalStore.apply`` on ``fence_store``; returns its result.
            checkpoint_ref: When given, the writes also point the record at this checkpoint
                and renew the lease (``record_checkpoint`` in the same transaction).

        Returns:
            ``True`` when everything landed; ``False`` when the fence held but the caller's
            own checks failed (nothing landed).

        Raises:
            LeaseError: ``RUN_LEASE_LOST`` (latched; nothing landed), also after this handle
                closed the run itself, so a run's last fenced write comes before ``complete``,
                ``fail``, ``cancel``, ``suspend`` or ``release``; ``RUN_VALIDATION_ERROR`` for
                a malformed ``checkpoint_ref``. Whatever ``apply`` raises propagates: that
                write's outcome is unknown, and the next call finds out.
        """
        ref = None
        if checkpoint_ref is not None:
            ref = _checked(dict(checkpoint_ref), checkpoint_ref_problem)
        return await fenced_write(self._claim, apply, ref)

    def fence_checks(self) -> list[Expect]:
        """The check of a fenced write: the run record is exactly the text last seen here.

        For a caller that serialises its writes with this handle's renewals itself; otherwise
        a renewal in between makes the check fail spuriously (``fenced`` avoids that).

        Raises:
            LeaseError: the latched ``RUN_LEASE_LOST``.
        """
        self._claim.raise_if_lost()
        return [Expect(self.fence_key, self._claim.record.to_json())]

    async def confirm_lost(self) -> bool:
        """Re-read the record after a failed fenced write: ``True`` (and latched) if lost.

        When the record is still this handle's, the handle adopts the stored copy, so the next
        ``fence_checks`` is current again.
        """
        if self._claim.lost is not None:
            return True
        async with self._claim.lock:
            return await self._claim.confirm()

    # --- internals -------------------------------------------------------------------------

    async def _finish(self, status: RunStatus, outcome: Mapping[str, object]) -> RunRecord:
        checked = _checked(dict(outcome), outcome_problem)
        return await self._close(
            status, lambda current, now: tx.finished(current, status, checked, now)
        )

    async def _close(self, target: RunStatus, build: Build) -> RunRecord:
        """A command that ends this handle's ownership (RS-10): stop renewing, then converge.

        Converging: when the record already has ``target`` at this handle's fencing token,
        it is returned without a write, so repeating the command is a no-op.
        """
        self._closed = True
        await self._heartbeat.stop()  # outside the lock: a beat in progress may wait for it
        claim = self._claim
        async with claim.lock:
            if claim.lost is None:
                # These commands drop the lease, so the fence would refuse a repeat. The same
                # status at this handle's token means this handle already did it: converge.
                seen = await claim.terms.run_store.get(self.run_id)
                if claim.at_token(seen) and seen is not None and seen.status == target:
                    claim.record = seen
                    return seen

            def guarded(current: RunRecord, now: datetime) -> RunRecord | None:
                if current.status == target:
                    return None
                check_transition(self.run_id, current.status, target)
                return build(current, now)

            return await claim.write(guarded)

    async def _locked_write(self, build: Build) -> RunRecord:
        self._claim.raise_if_lost()
        async with self._claim.lock:
            return await self._claim.write(build)

    def _latched(self, error: LeaseError) -> None:
        """The loss just latched: stop renewing and tell the observer."""
        self._heartbeat.request_stop()
        if self._on_lost is not None:
            try:
                self._on_lost(error)
            except Exception:
                # Reporting a loss must never undo it or break the path that found it.
                logger.exception("on_lost callback of run %r raised", self.run_id)

    async def _beat(self) -> bool:
        """One heartbeat renewal; ``False`` ends the heartbeat (RS-11)."""
        try:
            await self.renew()
            return True
        except LeaseError as error:
            if self._claim.lost is not None:
                return False
            logger.warning("lease renewal of run %r failed: %s", self.run_id, error)
        except Exception:
            logger.warning("lease renewal of run %r failed", self.run_id, exc_info=True)
        # No verdict from the store. Once our lease has run out by our own clock we can no
        # longer claim the run: call it lost rather than keep working unowned.
        lease = self._claim.record.lease
        if lease is None or not lease.is_live(self._claim.terms.now()):
            message = f"run {self.run_id!r}: the lease expired while it could not be renewed"
            self._claim.latch(LeaseError(LEASE_LOST, message, self._claim.record))
            return False
        return True


def _checked(
    value: dict[str, object], problem_of: Callable[[object], str | None]
) -> dict[str, object]:
    problem = problem_of(value)
    if problem is not None:
        raise LeaseError(VALIDATION, problem)
    return value

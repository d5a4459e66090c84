"""Run ownership in the flows: acquire the lease first, fence every write, settle the record.

With a run store (spec RS-12, decision D11) a run has one owner at a time. A flow acquires the
run's lease before any work (a ``LeaseError`` such as ``RUN_LEASE_HELD`` then reaches the caller
and nothing ran), hands the lease to the run's ``RunWriter`` so that every snapshot is fenced,
passes the fencing token to every tool (``ToolContext.fencing_token``), and settles the run
record from the result: completed, suspended (with the pending approval ids) or failed. A run
that lost its lease stops with ``status.code == "aborted"`` and writes nothing more; the loss is
announced once as ``LeaseLost``. Leaving the flow any other way (an error, cancellation)
releases the lease so that a restore may take the run at once.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from oma_actors.errors import LeaseError
from oma_actors.events import LeaseLost
from oma_actors.runs import settle_record

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from oma_actors.domain.results import TeamRunResult
    from oma_actors.events import ProgressEvent
    from oma_actors.runs import RunLeaseHandle, RunStoreOptions

logger = logging.getLogger(__name__)


@asynccontextmanager
async def owning(
    options: RunStoreOptions | None, run_id: str, emit: Callable[[ProgressEvent], None]
) -> AsyncIterator[RunLeaseHandle | None]:
    """Hold ``run_id``'s lease for the block; ``None`` without a run store.

    Raises:
        LeaseError: the run could not be acquired (held by a live owner, terminal, suspended
            awaiting a decision, or the record is invalid); nothing ran.
    """
    if options is None:
        yield None
        return

    def lost(error: LeaseError) -> None:
        logger.warning("run %s: lease lost: %s", run_id, error)
        emit(LeaseLost(run_id=run_id, reason=str(error)))

    handle = await options.ledger().acquire(run_id, heartbeat=options.heartbeat, on_lost=lost)
    logger.info(
        "run %s: lease acquired by %s (fencing token %d, attempt %d)",
        run_id, handle.owner, handle.fencing_token, handle.attempt,
    )  # fmt: skip
    try:
        yield handle
    finally:
        if not handle.closed and handle.lost is None:
            await handle.release()


async def settle(lease: RunLeaseHandle | None, result: TeamRunResult) -> None:
    """Record how the run ended in its run record (no-op without a lease or after a loss):
    ``oma_actors.runs.settle_record``."""
    if lease is None or lease.lost is not None:
        return
    status = result.status
    approval_ids = [request.id for request in result.pending_approvals]
    try:
        await settle_record(lease, status.code, status.message, approval_ids)
    except LeaseError as exc:
        # Lost between the run's last write and its settlement: the new owner decides.
        logger.warning("run %s could not be settled: %s", result.run_id, exc)

"""The sidecar's side of the run ledger (leased runs on a store several sidecars share).

Two rules keep the sidecar's registry and the ledger's run record from contradicting each
other:

- ``RestoreRun`` of a FAILED run: the ledger's ``failed`` is terminal (no transition leaves it,
  not even ``request_resume``), so no attempt could ever acquire the lease. The restore is
  refused up front with FAILED_PRECONDITION/``RUN_RECORD_TERMINAL`` instead of launching an
  attempt that fails with ``RUN_ALREADY_TERMINAL``: start a new run (``DeleteRun`` the old one).
- ``CancelRun`` also cancels the run record (the ledger fences its holder, fencing token + 1),
  so no sidecar's failover sweep adopts the cancelled run later.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from oma_actors import LeaseError
from oma_actors.runs import RunLedger, is_terminal
from sidecar.status import FailedPrecondition

if TYPE_CHECKING:
    from oma_actors.runs import RunStoreOptions


async def check_resumable(terms: RunStoreOptions | None, run_id: str) -> None:
    """Refuse to restore a run whose run record is terminal.

    Raises:
        FailedPrecondition: ``RUN_RECORD_TERMINAL``.
    """
    if terms is None:
        return
    stored = await terms.store.get(run_id)
    if stored is not None and is_terminal(stored.status):
        raise FailedPrecondition(
            "RUN_RECORD_TERMINAL",
            f"run {run_id!r} cannot be resumed: its run record (lease) is terminal "
            f"({stored.status}) on this shared store; start a new run",
            metadata={"run_record_status": stored.status},
        )


async def cancel_record(terms: RunStoreOptions | None, run_id: str, reason: str) -> None:
    """Cancel the run record of ``run_id`` if it has one and it is not terminal yet."""
    if terms is None:
        return
    ledger = RunLedger(terms.store, owner=terms.owner, lease_ttl=terms.lease_ttl)
    with contextlib.suppress(LeaseError):  # no record, or it ended already
        await ledger.cancel(run_id, reason or None)

"""The sidecar's writes into the run record (``oma_actors.runs``) outside an attempt's lease.

The run record is the authority on a run's fate (D16), so every way a run ends reaches it:

- ``CancelRun`` cancels the run record (the ledger fences its holder, fencing token + 1), so
  no sidecar's failover sweep adopts the cancelled run later.
- An attempt that fails with an error (not a store outage) left its lease released; the run
  record is failed too, so the run ends ``failed`` on every store and ``RestoreRun`` of a
  FAILED run is refused everywhere: start a new run.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from oma_actors import LeaseError
from oma_actors.runs import RunLedger

if TYPE_CHECKING:
    from collections.abc import Mapping

    from oma_actors.runs import RunStoreOptions


async def cancel_record(terms: RunStoreOptions | None, run_id: str, reason: str) -> None:
    """Cancel the run record of ``run_id`` if it has one and it is not terminal yet."""
    if terms is None:
        return
    ledger = RunLedger(terms.store, owner=terms.owner, lease_ttl=terms.lease_ttl)
    with contextlib.suppress(LeaseError):  # no record, or it ended already
        await ledger.cancel(run_id, reason or None)


async def fail_record(
    terms: RunStoreOptions | None, run_id: str, outcome: Mapping[str, object]
) -> None:
    """Fail the run record of ``run_id`` unless another owner holds it or it has ended."""
    if terms is None:
        return
    ledger = RunLedger(terms.store, owner=terms.owner, lease_ttl=terms.lease_ttl)
    with contextlib.suppress(LeaseError):  # held elsewhere, or it ended already
        lease = await ledger.acquire(run_id, heartbeat=False)
        await lease.fail(outcome)

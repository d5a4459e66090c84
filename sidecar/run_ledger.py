"""The sidecar's writes into the run record (``oma_actors.runs``) outside an attempt's lease.

The run record is the authority on a run's fate (D16), so every way a run ends reaches it:

- ``CancelRun`` cancels the run record (the ledger fences its holder, fencing token + 1), so
  no sidecar's failover sweep adopts the cancelled run later.
- An attempt that fails with an error (not a store outage) left its lease released; the run
  record is failed too, so the run ends ``failed`` on every store and ``RestoreRun`` of a
  FAILED run is refused everywhere: start a new run.
- ``CancelRun`` of a run that executes nowhere cancels the run record first
  (``cancel_unheld``), refused if a sidecar took its lease meanwhile.
- ``DeleteRun`` holds the lease of a run whose record has not ended (``claim_unfinished``), so
  a ``RestoreRun`` racing it is refused by the run record, whatever it read.
- A restore or an adoption first takes the run's lease (``claim_record``): of two sidecars
  claiming a run at once, the run record's ``acquire`` lets exactly one win, whatever either
  read before.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from oma_actors import LeaseError
from oma_actors.runs import MemoryStoreRunStore, is_terminal

if TYPE_CHECKING:
    from collections.abc import Mapping

    from oma_actors.runs import RunLeaseHandle, RunStoreOptions


async def cancel_record(terms: RunStoreOptions, run_id: str, reason: str) -> None:
    """Cancel the run record of ``run_id`` if it has one and it is not terminal yet."""
    ledger = terms.ledger()
    with contextlib.suppress(LeaseError):  # no record, or it ended already
        await ledger.cancel(run_id, reason or None)


async def cancel_unheld(terms: RunStoreOptions, run_id: str, reason: str) -> None:
    """Cancel the run record of a run this sidecar does not execute, before its registry does.

    Refused while another sidecar holds a live lease of it (it runs there, or adopted or
    restored it since it was read): the run record decides, in one compare-and-set, against
    every claim. A run that has no run record yet (forked and never started, or registered and
    never taken) gets one first, so its end is recorded where every sidecar reads it (D16).

    Raises:
        LeaseError: ``RUN_LEASE_HELD``, ``RUN_ALREADY_TERMINAL`` or ``RUN_CONFLICT``.
    """
    ledger = terms.ledger()
    if await ledger.get(run_id) is None:
        await ledger.acquire(run_id, heartbeat=False)  # refused if a sidecar took it meanwhile
    await ledger.cancel(run_id, reason or None, unless_held=True)


async def fail_record(terms: RunStoreOptions, run_id: str, outcome: Mapping[str, object]) -> None:
    """Fail the run record of ``run_id`` unless another owner holds it or it has ended."""
    ledger = terms.ledger()
    with contextlib.suppress(LeaseError):  # held elsewhere, or it ended already
        lease = await ledger.acquire(run_id, heartbeat=False)
        await lease.fail(outcome)


async def claim_record(terms: RunStoreOptions, run_id: str) -> RunLeaseHandle:
    """Take the lease of ``run_id`` for this sidecar before it claims the run.

    A suspended run record is queued first (``request_resume``) so it can be acquired. The
    handle renews nothing: the attempt launched next acquires the lease again as the same
    owner (a renewal, which fences this handle out), and a claim that goes no further lets it
    lapse or releases it.

    Raises:
        LeaseError: ``RUN_LEASE_HELD`` (another sidecar holds a live lease),
            ``RUN_ALREADY_TERMINAL`` or ``RUN_CONFLICT``.
    """
    ledger = terms.ledger()
    current = await ledger.get(run_id)
    if current is not None and current.status == "suspended":
        await ledger.request_resume(run_id)
    return await ledger.acquire(run_id, heartbeat=False)


async def claim_unfinished(terms: RunStoreOptions, run_id: str) -> None:
    """Take the lease of ``run_id`` for a deletion unless its run record has ended.

    Held (until the run's keys, its run record among them, are gone), it refuses every
    restore and adoption that would acquire the run meanwhile; a run record that ended can be
    acquired by nobody, so there is nothing to hold.

    Raises:
        LeaseError: ``RUN_LEASE_HELD`` (another sidecar holds a live lease) or
            ``RUN_CONFLICT``.
    """
    current = await terms.ledger().get(run_id)
    if current is not None and not is_terminal(current.status):
        await claim_record(terms, run_id)


async def drop_claim(terms: RunStoreOptions, run_id: str) -> None:
    """Remove the run record a claim took on a run whose deletion it raced.

    A deletion removes the run record before the registry's record; a claim that read the
    run before the deletion began and acquired it after the run record was gone made a new
    one, which nothing else would remove (a run record naming a run nobody lists).
    """
    store = terms.store
    if isinstance(store, MemoryStoreRunStore):
        await store.delete(run_id)


async def release_claim(handle: RunLeaseHandle) -> None:
    """Give back the lease of a claim that went no further (lost, or ended, meanwhile)."""
    with contextlib.suppress(LeaseError):  # taken over or deleted meanwhile: not ours
        await handle.release()

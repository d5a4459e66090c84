"""Run ownership: run records, leases and fencing tokens (spec 17.5, RS-01..RS-12; D11).

A checkpoint says what state a run can resume from; the run record says who may advance it.
``RunLedger`` (one per worker) acquires a run's lease through a ``RunStore``; the
``RunLeaseHandle`` it returns is the owner's capability: renew, record a checkpoint, suspend,
complete, fail, cancel, release, and fence a store write so that after a takeover no write of
the old owner lands. Records are OMA's JSON at ``__oma_run__/<runId>``::

    ledger = RunLedger(MemoryStoreRunStore(store), owner="worker-a")
    async with ledger.acquire("run-1") as handle:
        ...
        await handle.complete()
"""

from oma_actors.runs.handle import RunLeaseHandle
from oma_actors.runs.ledger import DEFAULT_LEASE_TTL, Acquisition, RunLedger
from oma_actors.runs.lifecycle import RUN_STATUSES, RunStatus, can_transition, is_terminal
from oma_actors.runs.listing import RunSummary, list_runs, read_run_records
from oma_actors.runs.options import RunStoreOptions, resolve_run_store
from oma_actors.runs.record import Lease, RunRecord, lease_live
from oma_actors.runs.settle import settle_record
from oma_actors.runs.store import MemoryStoreRunStore, RunStore, is_run_record_key

__all__ = [
    "DEFAULT_LEASE_TTL",
    "RUN_STATUSES",
    "Acquisition",
    "Lease",
    "MemoryStoreRunStore",
    "RunLeaseHandle",
    "RunLedger",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "RunStoreOptions",
    "RunSummary",
    "can_transition",
    "is_run_record_key",
    "is_terminal",
    "lease_live",
    "list_runs",
    "read_run_records",
    "resolve_run_store",
    "settle_record",
]

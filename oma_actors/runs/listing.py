"""``list_runs``: every run record a store holds, for operators (``oma runs list``).

A record that does not parse is listed as ``unreadable`` with its error, never skipped: a run
missing from a listing is a run nobody looks after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.clock import to_iso
from oma_actors.errors import LeaseError
from oma_actors.keyspace import RUN_KEY_PREFIX
from oma_actors.runs.record import RunRecord
from oma_actors.stores.prefix import list_under

if TYPE_CHECKING:
    from oma_actors.stores.base import MemoryStore


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One run record, flattened for display.

    Attributes:
        run_id: the run (from the key when the record is unreadable).
        status: the record's status, or ``unreadable`` (see ``error``).
        attempt: the record's attempt (0 when unreadable).
        fencing_token: the current owner's token (0 when unreadable).
        owner: who holds the lease, if anyone.
        lease_expires_at: when that lease expires (ISO-8601), if there is one.
        error: why the record could not be read.
    """

    run_id: str
    status: str
    attempt: int
    fencing_token: int
    owner: str | None = None
    lease_expires_at: str | None = None
    error: str | None = None


async def read_run_records(store: MemoryStore) -> dict[str, RunRecord | LeaseError]:
    """Every run record in ``store`` by run id, in store order: the record, or why it cannot
    be read (``RUN_VALIDATION_ERROR``).

    Only the run records are read (``list(prefix=)``): a store's checkpoints, journal rows and
    approvals never cross the wire for a listing.
    """
    found: dict[str, RunRecord | LeaseError] = {}
    for entry in await list_under(store, RUN_KEY_PREFIX):
        run_id = entry.key.removeprefix(RUN_KEY_PREFIX)
        try:
            found[run_id] = RunRecord.parse(entry.value, run_id=run_id)
        except LeaseError as exc:
            found[run_id] = exc
    return found


async def list_runs(store: MemoryStore) -> list[RunSummary]:
    """Summarize every run record in ``store`` (keys under ``__oma_run__/``), in store order."""
    found: list[RunSummary] = []
    for run_id, record in (await read_run_records(store)).items():
        if isinstance(record, LeaseError):
            found.append(
                RunSummary(run_id=run_id, status="unreadable", attempt=0, fencing_token=0,
                           error=str(record))
            )  # fmt: skip
            continue
        lease = record.lease
        found.append(
            RunSummary(
                run_id=record.run_id,
                status=record.status,
                attempt=record.attempt,
                fencing_token=record.fencing_token,
                owner=lease.owner if lease is not None else None,
                lease_expires_at=to_iso(lease.expires_at) if lease is not None else None,
            )
        )
    return found

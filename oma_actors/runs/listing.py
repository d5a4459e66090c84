"""``list_runs``: every run record a store holds, for operators (``oma runs list``).

A record that does not parse is listed as ``unreadable`` with its error, never skipped: a run
missing from a listing is a run nobody looks after.

A record's ``status`` is what its last writer stored, so a ``running`` record stays ``running``
after its process died: nothing writes the death down. Whether someone still advances the run
is the lease, judged at the time of the listing (``RunSummary.live``, ``RunSummary.state``);
the same rule as ``oma runs delete`` refusing a live run and the sidecar showing it
``INTERRUPTED``. It is derived, never stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.clock import to_iso, utcnow
from oma_actors.errors import LeaseError
from oma_actors.keyspace import RUN_KEY_PREFIX
from oma_actors.runs.record import RunRecord, lease_live
from oma_actors.stores.prefix import list_under

if TYPE_CHECKING:
    from datetime import datetime

    from oma_actors.stores.base import MemoryStore


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One run record, flattened for display.

    Attributes:
        run_id: the run (from the key when the record is unreadable).
        status: the record's status, or ``unreadable`` (see ``error``).
        state: ``status`` as an operator reads it at the time of the listing: a ``running``
            record that no live lease holds reads ``running (lease expired 12s ago)`` (its
            process died or stalled; nothing advances the run until someone takes it) or
            ``running (no lease)``.
        live: whether a lease that has not expired holds the run at the time of the listing.
        attempt: the record's attempt (0 when unreadable).
        fencing_token: the current owner's token (0 when unreadable).
        owner: who holds the lease, if anyone.
        lease_expires_at: when that lease expires (ISO-8601), if there is one.
        error: why the record could not be read.
    """

    run_id: str
    status: str
    state: str
    live: bool = False
    attempt: int
    fencing_token: int
    owner: str | None = None
    lease_expires_at: str | None = None
    error: str | None = None

    @classmethod
    def of(cls, record: RunRecord | LeaseError, *, run_id: str, now: datetime) -> RunSummary:
        """The summary of ``record`` (or of why it could not be read) as it stands at ``now``."""
        if isinstance(record, LeaseError):
            return cls(run_id=run_id, status="unreadable", state="unreadable", attempt=0,
                       fencing_token=0, error=str(record))  # fmt: skip
        lease = record.lease
        return cls(
            run_id=record.run_id,
            status=record.status,
            state=_state(record, now),
            live=lease_live(record, now),
            attempt=record.attempt,
            fencing_token=record.fencing_token,
            owner=lease.owner if lease is not None else None,
            lease_expires_at=to_iso(lease.expires_at) if lease is not None else None,
        )


def _state(record: RunRecord, now: datetime) -> str:
    """``record.status``, said not to be live when it is ``running`` under no live lease."""
    if record.status != "running" or lease_live(record, now):
        return record.status
    if record.lease is None:
        return "running (no lease)"
    expired = (now - record.lease.expires_at).total_seconds()
    return f"running (lease expired {_duration(expired)} ago)"


def _duration(seconds: float) -> str:
    """``seconds`` rounded down to a readable unit: up to 119s in seconds, then 2m.., 2h.., 2d.."""
    whole = max(int(seconds), 0)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if whole >= 2 * size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


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


async def list_runs(store: MemoryStore, *, now: datetime | None = None) -> list[RunSummary]:
    """Summarize every run record in ``store`` (keys under ``__oma_run__/``), in store order.

    Args:
        store: the store holding the run records.
        now: the time leases are judged at (``RunSummary.live``, ``state``); the system
            clock's now by default.
    """
    at = utcnow() if now is None else now
    records = await read_run_records(store)
    return [RunSummary.of(record, run_id=run_id, now=at) for run_id, record in records.items()]

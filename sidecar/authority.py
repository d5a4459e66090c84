"""What a run's status is: the run record (``oma_actors.runs``) decides, the registry shows.

Every sidecar runs its runs under a lease in its state store (``sidecar.failover``), so the run
record says who owns a run and whether it settled. The sidecar's registry keeps what it was
last told; where the two disagree for a run that does not execute in this process, the run
record wins:

- its lease expired (its holder, the registry's owner, died, stalled or lost the store), or
  the registry's owner (who claimed it) has not acquired it for a TTL, or it was given up
  unfinished and nobody took it for a TTL: the run is ``INTERRUPTED`` (a live sidecar adopts
  it, ``RestoreRun`` may too);
- it settled (completed, failed, cancelled, suspended) while the registry still says it runs
  (its sidecar died between the two writes): the run record's status is shown.

``STATUS_OF_RECORD`` is the one table from the run record's vocabulary to the wire's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.record import Outcome

if TYPE_CHECKING:
    from datetime import datetime

    from oma_actors import RunRecord as LeaseRecord
    from sidecar.record import RunRecordV1, RunStatus

STATUS_OF_RECORD: dict[str, RunStatus] = {
    "queued": pb.RUN_STATUS_QUEUED,
    "running": pb.RUN_STATUS_RUNNING,
    "suspended": pb.RUN_STATUS_SUSPENDED,
    "completed": pb.RUN_STATUS_COMPLETED,
    "failed": pb.RUN_STATUS_FAILED,
    "cancelled": pb.RUN_STATUS_CANCELLED,
}
"""A run record's status as the wire shows it."""
UNSETTLED = frozenset({"queued", "running"})
INTERRUPTED = Outcome(code="interrupted", message="no live sidecar holds the run's lease")


def shown(
    record: RunRecordV1, lease: LeaseRecord | None, *, now: datetime, ttl: float
) -> RunRecordV1:
    """``record`` with the status its run record ``lease`` decides (for an active ``record``
    that does not execute in this process)."""
    if not record.active:
        return record
    if lease is not None and lease.status not in UNSETTLED:
        return replace(record, status=STATUS_OF_RECORD[lease.status])
    holder = lease.lease if lease is not None else None
    if holder is not None and holder.expires_at > now:
        return record  # its holder renews it: it runs there
    if holder is not None and holder.owner == record.owner_id:
        return replace(record, status=pb.RUN_STATUS_INTERRUPTED, outcome=INTERRUPTED)
    # No lease (not acquired yet, or given up unfinished), or a lapsed one of an owner the
    # registry no longer names (a sidecar claimed the run and is about to acquire it): a TTL
    # later nobody has taken it.
    if (now - record.updated_at).total_seconds() < ttl:
        return record
    return replace(record, status=pb.RUN_STATUS_INTERRUPTED, outcome=INTERRUPTED)

"""What a run's status is: the run record (``oma_actors.runs``) decides, the registry shows.

Every sidecar runs its runs under a lease in its state store (``sidecar.failover``), so the run
record says who owns a run and whether it settled. The sidecar's registry keeps what it was
last told; where the two disagree for a run that does not execute in this process, the run
record wins:

- its lease expired (its holder died, stalled or lost the store), or it has no lease (never
  acquired, or given up unfinished) and nobody took it for a TTL: the run is ``INTERRUPTED``
  (a live sidecar adopts it, ``RestoreRun`` may too);
- it settled (completed, failed, cancelled, suspended) while the registry still says it runs
  (its sidecar died between the two writes): the run record's status is shown.

``STATUS_OF_RECORD`` is the one table from the run record's vocabulary to the wire's.

A claim on a run (a restore, an adoption, a cancel, a deletion) is decided by its run record
first (``sidecar.run_ledger``: a restore, an adoption and a deletion take its lease, a cancel
cancels it unless a sidecar holds it), then written to the registry in a compare-and-set that
requires the record unchanged since it was read (``check_unchanged``, which still separates
two claims of one process: they share an owner, so the lease cannot). Of two claims racing,
exactly one wins.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.owner import label_of
from sidecar.record import TERMINAL, Outcome
from sidecar.status import FailedPrecondition

if TYPE_CHECKING:
    from datetime import datetime

    from oma_actors.runs import RunRecord as LeaseRecord
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
    if holder is not None:
        # Lapsed, whoever held it: a claim takes the lease before it names its owner in the
        # registry (``sidecar.run_ledger.claim_record``), so no claimant is about to take it.
        return replace(record, status=pb.RUN_STATUS_INTERRUPTED, outcome=INTERRUPTED)
    # No lease (a new run's first attempt has not acquired it yet, or it was given up
    # unfinished): a TTL later nobody has taken it. Counted from the run record's last write
    # (the release) when there is one: an attempt that stopped on an unreachable store gives
    # its lease up as the store returns and goes on at once (``Execution._resume``), however
    # long ago the registry last wrote.
    since = lease.updated_at if lease is not None else record.updated_at
    if (now - since).total_seconds() < ttl:
        return record
    return replace(record, status=pb.RUN_STATUS_INTERRUPTED, outcome=INTERRUPTED)


def check_unchanged(current: RunRecordV1, seen: RunRecordV1, claimed: str = "RUN_ACTIVE") -> None:
    """Refuse a claim on a run another request changed after it was ``seen``: a restore or an
    adoption claimed it (``claimed``), or it ended (``RUN_ALREADY_TERMINAL``)."""
    if current.deleting:
        raise deleting_error(current)
    if (current.owner_id, current.attempt) != (seen.owner_id, seen.attempt):
        raise FailedPrecondition(
            claimed,
            f"run {current.run_id!r} runs in another sidecar ({label_of(current.owner_id)})",
            metadata={"owner_id": current.owner_id},
        )
    if current.status != seen.status:
        check_cancellable(current)
        raise FailedPrecondition("RUN_ACTIVE", f"run {current.run_id!r} is running")


def deleting_error(record: RunRecordV1) -> FailedPrecondition:
    """The refusal of a claim on a run ``DeleteRun`` claimed first."""
    return FailedPrecondition("RUN_DELETING", f"run {record.run_id!r} is being deleted")


def check_cancellable(record: RunRecordV1) -> None:
    """Refuse (``RUN_ALREADY_TERMINAL``) a run that has ended."""
    if record.status in TERMINAL | {pb.RUN_STATUS_FAILED}:
        raise FailedPrecondition(
            "RUN_ALREADY_TERMINAL",
            f"run {record.run_id!r} is {pb.RunStatus.Name(record.status)}",
        )

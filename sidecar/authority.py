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
alone (``sidecar.run_ledger``: a restore, an adoption and a deletion take its lease, a cancel
cancels it unless a sidecar holds it); two claims of one process, which share an owner, are
taken one after the other (``sidecar.claims``). Of two claims racing, exactly one wins.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
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
    """``record`` with the status its run record ``lease`` decides, for a run that does not
    execute in this process (whatever the registry last wrote: D16).

    - The run record settled (completed, failed, cancelled, suspended): that status. The
      registry's outcome is kept when it says the same (it names host calls that timed out),
      else the run record's.
    - Someone holds a live lease: the run runs there (``RUNNING``, or the registry's
      ``QUEUED`` while its claimant has not started the attempt yet).
    - The lease lapsed, or nobody took the run for a TTL after it was given up (or, with no
      run record yet, after the registry created it): ``INTERRUPTED``.
    - No run record and an ended registry record (a run that never held a lease): as it is.
    """
    if lease is None:
        if not record.active:
            return record
        return _unheld(record, record.updated_at, now=now, ttl=ttl)
    if lease.status not in UNSETTLED:
        status = STATUS_OF_RECORD[lease.status]
        if status == record.status:
            return record
        return replace(record, status=status, outcome=_outcome_of(lease))
    holder = lease.lease
    if holder is not None and holder.expires_at > now:
        if record.active:
            return record  # its holder renews it: it runs there
        return replace(record, status=pb.RUN_STATUS_RUNNING, outcome=Outcome())
    if holder is not None:
        # Lapsed, whoever held it: a claim takes the lease before it names its owner in the
        # registry (``sidecar.run_ledger.claim_record``), so no claimant is about to take it.
        return replace(record, status=pb.RUN_STATUS_INTERRUPTED, outcome=INTERRUPTED)
    # No lease (given up unfinished): a TTL later nobody has taken it. Counted from the run
    # record's last write (the release): an attempt that stopped on an unreachable store gives
    # its lease up as the store returns and goes on at once (``Execution._resume``), however
    # long ago the registry last wrote.
    return _unheld(record, lease.updated_at, now=now, ttl=ttl)


def _unheld(record: RunRecordV1, since: datetime, *, now: datetime, ttl: float) -> RunRecordV1:
    """``record`` of a run nobody holds since ``since``: as it is for a TTL, then interrupted."""
    if (now - since).total_seconds() < ttl:
        return record if record.active else replace(record, status=pb.RUN_STATUS_QUEUED)
    return replace(record, status=pb.RUN_STATUS_INTERRUPTED, outcome=INTERRUPTED)


def _outcome_of(lease: LeaseRecord) -> Outcome:
    """The run record's outcome (OMA's ``{code, message}``) as the registry spells one."""
    found = lease.outcome or {}
    code, message = found.get("code", ""), found.get("message", "")
    return Outcome(code=code if isinstance(code, str) else "", message=str(message or ""))


def check_not_deleting(record: RunRecordV1) -> None:
    """Refuse (``RUN_DELETING``) a claim on a run ``DeleteRun`` claimed first."""
    if record.deleting:
        raise deleting_error(record)


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

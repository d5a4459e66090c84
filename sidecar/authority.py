"""What a run is: its run record (``oma_actors.runs``) decides, the registry only shows it (D16).

Every sidecar runs its runs under a lease in its state store (``sidecar.failover``), so the run
record says who holds a run and whether it settled. The registry's record keeps the run's spec,
the claims on it and what its last attempt left, and no status: :func:`view_of` derives the
status every sidecar shows from the run record alone:

- the run record settled (completed, failed, cancelled, suspended): that status;
- someone holds a live lease: ``RUNNING`` (there, or here);
- the lease lapsed (its holder died, stalled or lost the store), or nobody has taken the run
  for a TTL since it was given up unfinished: ``INTERRUPTED`` (a live sidecar adopts it,
  ``RestoreRun`` may too); within that TTL, still ``RUNNING`` (an attempt a short store outage
  stopped gives its lease up and goes on at once: nothing visible changes).

A run that has no run record yet was registered and not yet taken (``QUEUED``, ``INTERRUPTED``
a TTL after it was registered), or forked and never started (``INTERRUPTED``: ``RestoreRun``
starts it), or registered before D16 (the status its record stored).

``STATUS_OF_RECORD`` is the one table from the run record's vocabulary to the wire's.

A claim on a run (a restore, an adoption, a cancel, a deletion) is decided by its run record
alone (``sidecar.run_ledger``: a restore, an adoption and a deletion take its lease, a cancel
cancels it unless a sidecar holds it); two claims of one process, which share an owner, are
taken one after the other (``sidecar.claims``). Of two claims racing, exactly one wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.record import ACTIVE, TERMINAL, Outcome, RunView
from sidecar.status import FailedPrecondition

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from oma_actors.runs import RunRecord as LeaseRecord
    from sidecar.record import RunRecordV1, WireStatus

STATUS_OF_RECORD: dict[str, WireStatus] = {
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
NO_OUTCOME = Outcome()


def view_of(
    record: RunRecordV1,
    lease: LeaseRecord | None,
    *,
    now: datetime,
    ttl: float,
    here: WireStatus | None = None,
    waiting: Sequence[str] = (),
) -> RunView:
    """The run of ``record`` as its run record ``lease`` decides (see the module docstring).

    Args:
        record: the registry's record of the run.
        lease: its run record, ``None`` when it has none.
        now: the time the lease is judged at.
        ttl: the lease TTL.
        here: the status of an attempt executing in this process (``QUEUED`` until it
            starts, then ``RUNNING``): shown until the attempt has written what it left, so a
            client never sees the run ended without its result.
        waiting: the approvals that attempt waits for (with ``here``).
    """
    if here is not None:
        return _view(record, here, record.outcome, record.updated_at, pending=tuple(waiting))
    ended = settled_status(record, lease)
    if ended is not None:
        at = lease.updated_at if lease is not None else record.updated_at
        return _view(
            record, ended, outcome_of_record(record, lease), at, pending=pending_of(record, lease)
        )
    if lease is None:
        return _unrecorded(record, now=now, ttl=ttl)
    holder = lease.lease
    if holder is not None and holder.expires_at > now:
        return _view(
            record, pb.RUN_STATUS_RUNNING, NO_OUTCOME, lease.updated_at, holder=holder.owner
        )
    if holder is not None:
        # Lapsed, whoever held it: a claim takes the lease before it counts its attempt in
        # the registry (``sidecar.run_ledger.claim_record``), so no claimant is about to take it.
        return _view(record, pb.RUN_STATUS_INTERRUPTED, INTERRUPTED, lease.updated_at)
    # No lease (given up unfinished): a TTL later nobody has taken it. Counted from the run
    # record's last write (the release): an attempt that stopped on an unreachable store gives
    # its lease up as the store returns and goes on at once (``Execution._resume``), so until
    # then it still shows running: an outage shorter than the lease changes nothing visible.
    return _unheld(record, lease.updated_at, now=now, ttl=ttl, waiting=pb.RUN_STATUS_RUNNING)


def _unrecorded(record: RunRecordV1, *, now: datetime, ttl: float) -> RunView:
    """The view of a run that has no run record and has not ended."""
    if record.legacy_status is None and record.forked:
        # Forked and never started: ``RestoreRun`` starts it; nothing adopts it.
        return _view(record, pb.RUN_STATUS_INTERRUPTED, record.outcome, record.updated_at)
    return _unheld(record, record.updated_at, now=now, ttl=ttl)


def _unheld(
    record: RunRecordV1,
    since: datetime,
    *,
    now: datetime,
    ttl: float,
    waiting: WireStatus = pb.RUN_STATUS_QUEUED,
) -> RunView:
    """The view of a run nobody holds since ``since``: ``waiting`` for a TTL, then
    interrupted."""
    if (now - since).total_seconds() < ttl:
        return _view(record, waiting, NO_OUTCOME, since)
    return _view(record, pb.RUN_STATUS_INTERRUPTED, INTERRUPTED, since)


def _view(
    record: RunRecordV1,
    status: WireStatus,
    outcome: Outcome,
    at: datetime,
    *,
    holder: str = "",
    pending: tuple[str, ...] = (),
) -> RunView:
    return RunView(
        record=record,
        status=status,
        outcome=outcome,
        updated_at=at,
        tasks=record.tasks,
        pending_approvals=pending,
        holder=holder,
    )


def pending_of(record: RunRecordV1, lease: LeaseRecord | None) -> tuple[str, ...]:
    """The approvals a run that is not executing here waits for: those its run record's
    suspension names (OMA's ``pendingApprovalIds``), or, without a run record, those a record
    from before D16 stored."""
    if lease is None:
        return record.legacy_pending
    if lease.status != "suspended" or lease.suspension is None:
        return ()  # (OMA's record may be suspended without saying on what)
    # A list of strings: a run record is checked as it is read (``suspension_problem``).
    return tuple(cast("list[str]", lease.suspension["pendingApprovalIds"]))


def outcome_of_record(record: RunRecordV1, lease: LeaseRecord | None) -> Outcome:
    """How the run of a settled run record ``lease`` ended.

    The registry's outcome belongs to the latest claim's attempt (a claim empties it) and names
    more (a mapped error reason, the host calls that timed out); until that attempt's sidecar
    wrote it, the run record's (OMA's ``{code, message}``).
    """
    if record.outcome.code or lease is None:
        return record.outcome
    found = lease.outcome or {}
    code, message = found.get("code"), found.get("message")
    if not isinstance(code, str):
        code = lease.status if lease.status == "suspended" else ""
    return Outcome(code=code, message=message if isinstance(message, str) else "")


def settled_status(record: RunRecordV1, lease: LeaseRecord | None) -> WireStatus | None:
    """The status the run of ``record`` ended with (``None``: it has not ended): its run
    record's, or, with none, the status a record from before D16 stored."""
    if lease is None:
        legacy = record.legacy_status
        return legacy if legacy is not None and legacy not in ACTIVE else None
    if lease.status in UNSETTLED:
        return None
    return STATUS_OF_RECORD[lease.status]


def check_not_deleting(record: RunRecordV1) -> None:
    """Refuse (``RUN_DELETING``) a claim on a run ``DeleteRun`` claimed first."""
    if record.deleting:
        raise deleting_error(record)


def deleting_error(record: RunRecordV1) -> FailedPrecondition:
    """The refusal of a claim on a run ``DeleteRun`` claimed first."""
    return FailedPrecondition("RUN_DELETING", f"run {record.run_id!r} is being deleted")


def check_cancellable(view: RunView) -> None:
    """Refuse (``RUN_ALREADY_TERMINAL``) a run that has ended."""
    if view.status in TERMINAL | {pb.RUN_STATUS_FAILED}:
        raise FailedPrecondition(
            "RUN_ALREADY_TERMINAL",
            f"run {view.run_id!r} is {pb.RunStatus.Name(view.status)}",
        )

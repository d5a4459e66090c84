"""The sidecar's run record and the view of a run: what the registry keeps, what a client sees.

A ``RunRecordV1`` is what the registry persists under ``__oma_sidecar__/run/<run_id>`` (through
``sidecar.record_codec``, as versioned JSON) and what every module reads back: the run's spec
(the start request), the claims on it (attempt, deletion), its event seq reservation and what its
last attempt left (result, tasks, outcome). It holds no status, no owner and no pending approvals:
what a run is (queued, running, interrupted, ended), who holds it and which approvals a
suspended run waits for are its run record's (``oma_actors.runs``, D16), and a ``RunView`` is
the two together (``sidecar.authority``). A
record is never mutated: a change is a new record built with ``dataclasses.replace`` and
written by ``RunRegistry.update`` with a compare-and-set, so two writers of one run cannot
silently overwrite each other.

Statuses are the wire enum's values (``pb.RUN_STATUS_*``, plain ints) because every reader
compares them with the wire's; the codec stores task statuses by name, so the storage format
does not depend on the enum's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeAlias

import grpc

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.convert import now
from sidecar.status import AlreadyExists, DataLoss, NotFound, SidecarError

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from oma_actors.approvals import ApprovalDecision

WireStatus: TypeAlias = pb.RunStatus
"""A run's status on the wire (``pb.RUN_STATUS_*``); the run record's own vocabulary is
``oma_actors.runs.RunStatus``, mapped to this one in ``sidecar.authority.STATUS_OF_RECORD``."""
WireTaskStatus: TypeAlias = pb.TaskStatus
"""A task's status on the wire (``pb.TASK_STATUS_*``); the core's is
``oma_actors.domain.TaskStatus``."""

TERMINAL: frozenset[WireStatus] = frozenset({pb.RUN_STATUS_COMPLETED, pb.RUN_STATUS_CANCELLED})
"""Statuses a run never leaves."""
FINISHED: frozenset[WireStatus] = TERMINAL | {
    pb.RUN_STATUS_FAILED,
    pb.RUN_STATUS_INTERRUPTED,
    pb.RUN_STATUS_SUSPENDED,
}
"""Statuses after which the run's event history is kept for watchers of a later process."""
SEQ_BLOCK = 1024
"""Event seqs reserved in a run record at a time (see ``sidecar.run_log``)."""
ACTIVE: frozenset[WireStatus] = frozenset({pb.RUN_STATUS_QUEUED, pb.RUN_STATUS_RUNNING})
"""Statuses of a run some sidecar (its owner) is executing."""
NO_TENANT = ""
"""The tenant of runs started without principals (``sidecar.tenancy``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How the last finished attempt ended: OMA's status code and message.

    ``code`` is ``ok``, ``error``, ``suspended``, ``rejected`` or ``aborted`` from OMA, or
    ``interrupted``, ``cancelled`` and the mapped error reasons set by the sidecar; empty while
    no attempt has finished.
    """

    code: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRow:
    """One task of a run as the registry last saw it."""

    id: str
    title: str = ""
    status: WireTaskStatus = pb.TASK_STATUS_UNSPECIFIED
    assignee: str = ""
    depends_on: tuple[str, ...] = ()
    result: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptResult:
    """The result of a run's last finished attempt.

    ``approval_decisions``: the decisions on the run's approval requests that the attempt
    knew of (a resumed run's too), in OMA's order, as the core records them (stored in the
    ledger's own form); none in a record from before they were kept.
    """

    success: bool
    outcome: Outcome
    synthesis: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    plan_only: bool = False
    approval_decisions: tuple[ApprovalDecision, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecordV1:
    """Everything the sidecar keeps about one run (stored as record schema 3).

    Attributes:
        run_id: the run.
        request_id: the ``StartRun`` request that created it (idempotency).
        request: the run's spec (``RestoreRun`` rebuilds the team from it). Never mutated:
            copy it, change the copy and ``replace`` the record.
        attempt: 1 for a fresh run, +1 per restore or adoption (a claim by a sidecar, in a
            compare-and-set: no two claims hold one attempt, so it alone tells an attempt
            whether the run is still its own, ``sidecar.fencing``). The run record's attempt
            counts lease takeovers (OMA RS-06: a restore of a suspended or released run keeps
            it); this one counts restores, as the wire's ``Run.attempt`` does (ID-04).
        forked: made by ``ForkRun``; such a run is started only by ``RestoreRun``, and nothing
            adopts it while it has no run record.
        created_at: when the run was registered.
        updated_at: the record's last write.
        outcome: how the last finished attempt ended, as the sidecar that ran it told (empty
            from a claim until that attempt ends).
        tasks: the run's tasks, in first-seen order, as an attempt's end (or claim) left them:
            while an attempt runs, its progress and the run's latest state are fresher
            (``sidecar.execution``).
        result: the last finished attempt's result, if any.
        store_uri: the checkpoint store of the run.
        seq_reserved_until: event seqs up to this one may be used (see ``sidecar.runs``).
        request_digest: sha256 of the ``StartRunRequest`` as received, so a retry with the
            same ``request_id`` but another body is refused. Empty in older records.
        tenant: the tenant of the principal that started the run (``sidecar.tenancy``); set at
            creation and never changed. ``""`` without principals, and in older records.
        deleting: ``DeleteRun`` claimed the run (its keys are being removed): no restore,
            cancel or adoption may claim it after that.
        resume_held: the last ``DecideApproval`` of the run asked ``RESUME_POLICY_NEVER``: its
            caller restores it, so no sidecar resumes it when it suspends with nothing pending
            (kept here, not in a process, because the run may execute on another sidecar).
        legacy_status: the status a record written before D16 stored (``None`` in a record
            written since): shown only while the run has no run record.
        legacy_pending: the pending approvals such a record stored (shown as for
            ``legacy_status``); a run record's suspension names them since (D16).
    """

    run_id: str
    request_id: str
    request: pb.StartRunRequest
    attempt: int = 1
    forked: bool = False
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    outcome: Outcome = Outcome()
    tasks: tuple[TaskRow, ...] = ()
    result: AttemptResult | None = None
    store_uri: str = ""
    seq_reserved_until: int = 0
    request_digest: str = ""
    tenant: str = ""
    deleting: bool = False
    resume_held: bool = False
    legacy_status: WireStatus | None = None
    legacy_pending: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """A run as a client sees it: its registry record with the status its run record decides.

    Built only by ``sidecar.authority`` (and, for a run executing in this process, from what
    the process knows of its attempt).

    Attributes:
        record: the registry's record.
        status: a ``pb.RUN_STATUS_*`` value.
        outcome: how the run's last attempt ended (empty while one runs).
        updated_at: the last change of the run (its run record's, else the registry's).
        tasks: the run's tasks as known now (the latest state's, else the record's).
        pending_approvals: the ids of the approval requests the run waits for: its attempt's
            here, else its run record's suspension.
        holder: the owner id of the sidecar holding the run's live lease (``""``: none).
    """

    record: RunRecordV1
    status: WireStatus
    outcome: Outcome
    updated_at: datetime
    tasks: tuple[TaskRow, ...]
    pending_approvals: tuple[str, ...]
    holder: str = ""

    @property
    def run_id(self) -> str:
        """The run."""
        return self.record.run_id

    @property
    def active(self) -> bool:
        """Whether the run is queued or running (some sidecar executes it)."""
        return self.status in ACTIVE


def reserving_until(wanted: int) -> Callable[[RunRecordV1], RunRecordV1]:
    """The record change reserving event seqs up to ``wanted`` (never lowering it)."""

    def reserve(record: RunRecordV1) -> RunRecordV1:
        return replace(record, seq_reserved_until=max(record.seq_reserved_until, wanted))

    return reserve


def releasing_reservation(held: int, used: int) -> Callable[[RunRecordV1], RunRecordV1]:
    """The record change giving back the unused seqs of a reservation at a graceful stop.

    ``held`` is the reservation this process holds and ``used`` the last seq it handed out.
    Only when the stored reservation is still ``held`` (no other process reserved above it)
    is it lowered to ``used``: the next process then continues right after the last event,
    and a watcher is told of no gap, because no event was lost.
    """

    def release(record: RunRecordV1) -> RunRecordV1:
        if record.seq_reserved_until != held or used >= held:
            return record
        return replace(record, seq_reserved_until=used)

    return release


def reserving_next_block(above: list[int]) -> Callable[[RunRecordV1], RunRecordV1]:
    """The record change reserving one more block of seqs above the stored reservation.

    ``above`` receives the stored reservation each application built on: seqs up to it may
    have been used by another process, so the caller's log must continue above it.
    """

    def reserve(record: RunRecordV1) -> RunRecordV1:
        above.append(record.seq_reserved_until)
        return replace(record, seq_reserved_until=record.seq_reserved_until + SEQ_BLOCK)

    return reserve


class UnknownRunError(NotFound):
    """The registry holds no run with this id."""

    def __init__(self, run_id: str) -> None:
        super().__init__("RUN_NOT_FOUND", f"no run {run_id!r}", metadata={"run_id": run_id})
        self.run_id = run_id


class UnreadableRunError(DataLoss):
    """A run's stored record exists but cannot be decoded (``ListRuns`` shows it unreadable)."""

    def __init__(self, run_id: str, problem: str) -> None:
        super().__init__(
            "RUN_RECORD_UNREADABLE",
            f"the stored record of run {run_id!r} cannot be read: {problem}",
            metadata={"run_id": run_id},
        )
        self.run_id = run_id
        self.problem = problem


class RunExistsError(AlreadyExists):
    """``RunRegistry.create`` found a record under the run id already (a start attaches to
    it; any other creator, a fork that lost a race, is refused with ``ALREADY_EXISTS``)."""

    def __init__(self, existing: RunRecordV1) -> None:
        super().__init__("RUN_ALREADY_EXISTS", f"run {existing.run_id!r} already exists")
        self.existing = existing


class RunRecordConflictError(SidecarError):
    """An update of a run record kept losing its compare-and-set to other writers."""

    code = grpc.StatusCode.ABORTED  # the client may retry the request

    def __init__(self, run_id: str, attempts: int) -> None:
        super().__init__(
            "RUN_RECORD_CONFLICT",
            f"run {run_id!r} was changed concurrently {attempts} times; retry",
            metadata={"run_id": run_id},
        )
        self.run_id = run_id

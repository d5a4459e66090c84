"""What a run needs to checkpoint, and building its snapshot from live state (spec SV-03)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.run_writer import Fence, RunWriter
from oma_actors.clock import SYSTEM_CLOCK, Clock, to_iso
from oma_actors.domain.snapshot import (
    CheckpointSnapshot,
    CompletedTask,
    InFlightTask,
    RunIdentity,
    RunMode,
)
from oma_actors.telemetry.context import current_trace

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.messages import TokenUsage
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.events import ProgressEvent
    from oma_actors.orchestration.journaling import RunJournaling
    from oma_actors.orchestration.options import ResolvedCheckpoint
    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.shared_memory import SharedMemory


def new_identity(run_id: str, attempt: int, *, continues: RunIdentity | None = None) -> RunIdentity:
    """This attempt's identity: the trace of the current OpenTelemetry span when tracing is on,
    else fresh random trace ids (spec ID-01, ID-04).

    With tracing on (inside ``OtelProgress.run()`` or any span the application opened around
    the run), the journal stamps every event with that span's trace (``current_trace``), so the
    snapshot's ``lastTraceId``/``lastRootSpanId`` name it too (SV-03: ``lastTraceId =
    traceId``, the run's trace): a later attempt's ``continued_from`` link then points at a
    span that was exported, not at ids no backend ever received. ``continues`` is the
    interrupted attempt's identity: a span current across both attempts (one application span
    around a run and its restore) is not taken twice, so an attempt never links to itself.
    """
    trace = current_trace()
    if trace is not None and (
        continues is None or trace != (continues.trace_id, continues.root_span_id)
    ):
        return RunIdentity(run_id=run_id, attempt=attempt, trace_id=trace[0], root_span_id=trace[1])
    trace_id = secrets.token_hex(16)
    while trace_id == "0" * 32:  # an all-zero trace id is invalid in W3C trace context
        trace_id = secrets.token_hex(16)
    return RunIdentity(
        run_id=run_id, attempt=attempt, trace_id=trace_id, root_span_id=secrets.token_hex(8)
    )


def identity_json(identity: RunIdentity) -> dict[str, Any]:
    """``identity`` in the snapshot's form (``runId``, ``attempt``, ``lastTraceId`` ...)."""
    return {
        "runId": identity.run_id,
        "attempt": identity.attempt,
        "lastTraceId": identity.trace_id,
        "lastRootSpanId": identity.root_span_id,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCheckpointing:
    """The active checkpoint of one run.

    Attributes:
        writer: the run's one writer (its checkpoint, revision and save outcomes).
        mode: the run's mode, as stored.
        identity: run id, attempt and this attempt's trace ids.
        goal: the run's goal, if any.
        embed_memory: embed the shared-memory snapshot (the checkpoint store is not the team's
            shared store, spec SV-04).
        metadata: run metadata, persisted as is.
        synthesis: a synthesis already stored (kept by every later save, decision D4).
        planning_usage: run_team's decomposition usage, so a restore still reports it.
        source: the checkpoint JSON the run was restored from; every save writes back what it
            holds that we do not model (the lossless re-save rule, issue 13).
        clock: stamps each snapshot's ``createdAt``.
        continued_from: the interrupted attempt's identity, on a restore (its trace is linked).
        journaling: the run's journal (OMA's mode): what each boundary changed is recorded
            before its snapshot is built, and the snapshot is v5 (watermark, lineage).
    """

    writer: RunWriter
    mode: RunMode
    identity: RunIdentity
    goal: str | None = None
    embed_memory: bool = True
    metadata: dict[str, Any] | None = None
    synthesis: AgentRunResult | None = None
    planning_usage: TokenUsage | None = None
    source: Mapping[str, Any] | None = None
    clock: Clock = SYSTEM_CLOCK
    journaling: RunJournaling | None = None
    continued_from: RunIdentity | None = None

    @property
    def checkpoint(self) -> Checkpoint:
        """Where the run's snapshots go."""
        return self.writer.checkpoint


def _settled(cp: RunCheckpointing, in_flight: Mapping[str, tuple[str, RunnerState]]) -> int | None:
    """Settle the run's journal at a boundary; the watermark its snapshot carries.

    The boundary's facts are recorded (``RunActor._boundary``), so the watermark taken here
    covers them (JR-08); the journal forgets the tasks no longer in flight.
    """
    journaling = cp.journaling
    if journaling is None:
        return None
    journaling.settle(in_flight)
    return journaling.recorder.last_seq


def run_at_boundary(
    cp: RunCheckpointing,
    *,
    in_flight: Mapping[str, tuple[str, RunnerState]],
    build: Callable[[int | None], Awaitable[CheckpointSnapshot]],
) -> RunAtBoundary:
    """The run at a boundary for its writer: the watermark now, the whole snapshot on demand.

    ``build(watermark)`` must build this boundary's snapshot with ``snapshot_of`` (the journal
    is settled here, once, as ``build_snapshot`` does); it is given the watermark captured
    here, so a snapshot built later still holds the run exactly through the seq the writer
    took the boundary's events to. A journal-only save never calls it (issue 19).
    """
    watermark = _settled(cp, in_flight)

    async def built() -> CheckpointSnapshot:
        return await build(watermark)

    return RunAtBoundary(
        run_id=cp.identity.run_id, watermark=watermark, in_flight=in_flight, build=built
    )


async def build_snapshot(
    cp: RunCheckpointing,
    *,
    queue: TaskQueue,
    memory: SharedMemory | None,
    results: Mapping[str, AgentRunResult],
    in_flight: Mapping[str, tuple[str, RunnerState]],
    synthesis: AgentRunResult | None = None,
    pending_approvals: Sequence[ApprovalRequest] = (),
    decisions: Sequence[ApprovalDecision] = (),
    announced: Collection[str] | None = None,
) -> CheckpointSnapshot:
    """A complete snapshot of the run as it is now (revision is stamped by the writer).

    The journal is settled first and the watermark taken, as at every boundary
    (``run_at_boundary``); then ``snapshot_of``.
    """
    return await snapshot_of(
        cp, queue=queue, memory=memory, results=results, in_flight=in_flight,
        watermark=_settled(cp, in_flight), synthesis=synthesis,
        pending_approvals=pending_approvals, decisions=decisions, announced=announced,
    )  # fmt: skip


async def snapshot_of(
    cp: RunCheckpointing,
    *,
    queue: TaskQueue,
    memory: SharedMemory | None,
    results: Mapping[str, AgentRunResult],
    in_flight: Mapping[str, tuple[str, RunnerState]],
    watermark: int | None,
    synthesis: AgentRunResult | None = None,
    pending_approvals: Sequence[ApprovalRequest] = (),
    decisions: Sequence[ApprovalDecision] = (),
    announced: Collection[str] | None = None,
) -> CheckpointSnapshot:
    """The whole snapshot of the run at a boundary whose journal was settled at ``watermark``.

    A restored task waiting to be re-dispatched is written as in progress while it has an
    in-flight entry, so the snapshot stays consistent (spec OR-08) even if the process dies
    before the task is dispatched again.
    """
    journaling = cp.journaling
    if journaling is not None:
        in_flight = journaling.opened(in_flight, watermark)
    tasks = tuple(
        replace(task, status="in_progress")
        if task.id in in_flight and task.status == "pending"
        else task
        for task in queue.tasks
    )
    shared: dict[str, Any] | None = None
    if memory is not None and cp.embed_memory:
        shared = await memory.snapshot()
    completed = tuple(
        CompletedTask(
            task_id=task.id,
            assignee=task.assignee,
            result=task.result,
            agent_result=results.get(task.id),
        )
        for task in tasks
        if task.status == "completed"
    )
    return CheckpointSnapshot(
        version=4,
        mode=cp.mode,
        run_id=cp.identity.run_id,
        attempt=cp.identity.attempt,
        revision=0,
        created_at=to_iso(cp.clock.now()),
        tasks=tasks,
        identity=cp.identity,
        goal=cp.goal,
        metadata=cp.metadata,
        shared_memory=shared,
        turn_count=memory.turn_count if memory is not None else None,
        completed=completed,
        in_flight=tuple(
            _entry(journaling, task_id, assignee, state)
            for task_id, (assignee, state) in in_flight.items()
        ),
        journal_watermark_seq=watermark,
        journal_ref=journaling.ref if journaling is not None else None,
        synthesis=synthesis or cp.synthesis,
        planning_usage=cp.planning_usage,
        # Sorted: a set's order would differ between two runs, and the fold's (D14) from both.
        announced=tuple(sorted(announced)) if announced is not None else None,
        pending_approvals=tuple(pending_approvals),
        approval_decisions=tuple(decisions),
        plan=queue.plan,
        source=cp.source,
    )


def _entry(
    journaling: RunJournaling | None, task_id: str, assignee: str, state: RunnerState
) -> InFlightTask:
    if journaling is None:
        return InFlightTask(task_id=task_id, assignee=assignee, state=state)
    seq, lineage = journaling.entry_fields(task_id, state)
    return InFlightTask(
        task_id=task_id,
        assignee=assignee,
        state=state,
        journal_seq=seq,
        conversation_lineage=lineage,
    )


def new_checkpointing(
    resolved: ResolvedCheckpoint,
    *,
    run_id: str,
    mode: RunMode,
    goal: str | None,
    emit: Callable[[ProgressEvent], None],
    planning_usage: TokenUsage | None = None,
    clock: Clock = SYSTEM_CLOCK,
    fence: Fence | None = None,
    attempt: int = 1,
    journaling: RunJournaling | None = None,
) -> RunCheckpointing:
    """The checkpointing of a fresh run (no save made yet).

    ``attempt`` is 1, or the run record's attempt when a run store took the run over from a
    holder that died before its first checkpoint, so snapshots and record agree.
    """
    checkpoint = Checkpoint(resolved.store, key=resolved.key, run_id=run_id)
    return RunCheckpointing(
        writer=RunWriter(checkpoint, emit=emit, fence=fence, replaces=True),
        mode=mode,
        identity=new_identity(run_id, attempt),
        goal=goal,
        embed_memory=not resolved.reuses_shared_store,
        planning_usage=planning_usage,
        clock=clock,
        journaling=journaling,
    )

"""One attempt of a run: the team, the orchestrator call, the progress observer, the result.

An attempt runs the record's spec through the public ``OpenMultiAgent`` API. Its progress
events go to the run's event log, and each durable checkpoint save acknowledges the host tool
results whose commit records it contains (``CheckpointSaved.committed``, see
``sidecar.tool_acks``). A run kept beside a file store passes its journal (``sidecar.journals``):
a save is then often a journal append (``CheckpointSaved.mode == "journal"``), and a restore
folds the journal's tail into the snapshot. The attempt closes the journal when it ends.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors import CheckpointOptions, OpenMultiAgent
from oma_actors.events import CheckpointSaved
from oma_actors.runs import settle_record
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.events import event_message
from sidecar.journals import journal_options
from sidecar.plugins import gates_of
from sidecar.record import Outcome, TaskRow
from sidecar.redelivery import issued_before
from sidecar.run_view import attempt_result_from, task_row_from_state

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from oma_actors import JournalOptions, TeamRunResult, Tool
    from oma_actors.events import ProgressEvent
    from oma_actors.journal import RunJournal
    from oma_actors.runs import RunLeaseHandle, RunStoreOptions
    from oma_actors.stores import MemoryStore
    from sidecar.journals import RunJournals
    from sidecar.record import RunRecordV1, WireStatus
    from sidecar.runs import RunRegistry
    from sidecar.tool_host import ToolHost

STATUS_OF_CODE: dict[str, WireStatus] = {
    "ok": pb.RUN_STATUS_COMPLETED,
    "suspended": pb.RUN_STATUS_SUSPENDED,
    "aborted": pb.RUN_STATUS_CANCELLED,
}

STOPPING = "the sidecar stopped while the run was running; it continues in another attempt"
"""Why a stopping sidecar cancels the runs it executes: their journals end ``run/end`` status
``aborted`` with this message, which reads ``RUN_STATUS_INTERRUPTED`` (nobody cancelled them)."""


def end_status(code: str, message: str | None) -> WireStatus:
    """The run status an attempt's end (``run/end``'s code and message) reads as."""
    if code == "aborted" and message == STOPPING:
        return pb.RUN_STATUS_INTERRUPTED
    return STATUS_OF_CODE.get(code, pb.RUN_STATUS_FAILED)


async def run_attempt(
    record: RunRecordV1,
    store: MemoryStore,
    *,
    restoring: bool,
    python_tools: Mapping[str, Tool],
    tool_host: ToolHost,
    on_progress: Callable[[ProgressEvent], None],
    run_store: RunStoreOptions,
    fenced: bool = True,
    journals: RunJournals | None = None,
) -> TeamRunResult:
    """Run ``record``'s spec once (from its checkpoint when ``restoring``), under its lease.

    With ``fenced`` (a store several sidecars share) a durable run's lease is the
    orchestrator's: every checkpoint and journal write is fenced by it. Otherwise (a store one
    process holds, or a run that saves nothing) the lease is held here around the attempt and
    settled from its result, so the run record is the run's authority all the same; the
    writes go unfenced, which keeps a file store's journal appends journal-first (an append
    to a journal file cannot carry a fence, D15) and costs nothing a rival could exploit:
    there is none.

    Args:
        record: the run as claimed for this attempt.
        store: the run's checkpoint store.
        restoring: resume from the checkpoint instead of starting.
        python_tools: the sidecar's own tools, by name.
        tool_host: delivers the calls of host tools.
        on_progress: receives the orchestrator's progress events.
        run_store: the lease terms of this sidecar. A run suspended on approvals is made
            eligible for a lease again before it is restored.
        fenced: the orchestrator holds a durable run's lease and fences its writes.
        journals: where the run's journal is (``None``: the run keeps none).

    Raises:
        LeaseError: the lease could not be acquired, or was lost (``RUN_LEASE_LOST``).
    """
    orchestrated = fenced and not record.request.checkpoint.disabled
    held: AbstractAsyncContextManager[RunLeaseHandle | None] = (
        nullcontext() if orchestrated else held_lease(run_store, record.run_id)
    )
    async with held as lease:
        async with _journal_of(record, journals) as journal:
            result = await _run(
                record,
                store,
                restoring=restoring,
                redelivered=await _redelivered(record, store, journal, restoring=restoring),
                python_tools=python_tools,
                tool_host=tool_host,
                on_progress=on_progress,
                run_store=run_store if orchestrated else None,
                journal=journal_options(journal),
            )
        if lease is not None:  # once the journal is closed: the run ends with it complete
            await settle(lease, result)
        return result


@asynccontextmanager
async def held_lease(terms: RunStoreOptions, run_id: str) -> AsyncIterator[RunLeaseHandle]:
    """Hold ``run_id``'s lease for the block (a restore's claim queued a suspended record
    first); a block left unsettled (an error, cancellation) releases it, so another owner may
    take it."""
    lease = await terms.ledger().acquire(run_id, heartbeat=terms.heartbeat)
    try:
        yield lease
    finally:
        if not lease.closed and lease.lost is None:
            await lease.release()


async def settle(lease: RunLeaseHandle, result: TeamRunResult) -> None:
    """Record how the attempt ended in the run record, as the orchestrator does with a lease
    (``settle_record``).

    Raises:
        LeaseError: ``RUN_LEASE_LOST``: the lease was lost meanwhile; the record is left to
            whoever holds it now.
    """
    if lease.lost is not None:
        raise lease.lost
    status = result.status
    pending = [request.id for request in result.pending_approvals]
    await settle_record(lease, status.code, status.message, pending)


@asynccontextmanager
async def _journal_of(
    record: RunRecordV1, journals: RunJournals | None
) -> AsyncIterator[RunJournal | None]:
    """The run's journal, open for the block (``None``: the run keeps none)."""
    if journals is None or record.request.checkpoint.disabled:
        yield None
        return
    journal = await journals.open(record.run_id, record.store_uri)
    try:
        yield journal
    finally:
        if journal is not None:
            await journals.release(journal)  # a file's holds a descriptor


async def _redelivered(
    record: RunRecordV1, store: MemoryStore, journal: RunJournal | None, *, restoring: bool
) -> frozenset[str] | None:
    """The calls of this attempt a host may have seen already (``None``: any of them)."""
    if restoring and not record.request.checkpoint.disabled:
        # Read before the restore reads the same checkpoint and journal. A first attempt
        # restores too: relaunched after its store came back (``RunExecutor``).
        return await issued_before(record, store, journal)
    if record.attempt == 1:
        return frozenset()
    return None  # a later attempt started over: its calls may repeat an earlier one's


async def _run(
    record: RunRecordV1,
    store: MemoryStore,
    *,
    restoring: bool,
    redelivered: frozenset[str] | None,
    python_tools: Mapping[str, Tool],
    tool_host: ToolHost,
    on_progress: Callable[[ProgressEvent], None],
    run_store: RunStoreOptions | None,
    journal: JournalOptions | None,
) -> TeamRunResult:
    request = record.request
    durable = not request.checkpoint.disabled
    host_tools = {definition.name: definition for definition in request.team.host_tools}

    def tools_of(agent: pb.AgentSpec) -> Sequence[Tool]:
        return [
            python_tools.get(name)
            or tool_host.make_tool(
                host_tools[name],
                run_attempt=record.attempt,
                durable=durable,
                tenant=record.tenant,
                redelivered=redelivered,
            )
            for name in agent.tools
        ]

    team = convert.team_of(request.team, tools_of)
    orchestrator = OpenMultiAgent(
        on_progress=on_progress,
        max_concurrency=request.max_concurrency or convert.DEFAULT_CONCURRENCY,
        run_store=run_store,  # the orchestrator's lease: a durable run's on a shared store
        **gates_of(request.approval_gates),
    )
    checkpoint: CheckpointOptions | bool = (
        CheckpointOptions(store=store, run_id=record.run_id, key=request.checkpoint.key or None)
        if durable
        else False
    )
    coordinator = (
        convert.agent_config(request.goal.coordinator, ())
        if request.goal.HasField("coordinator")
        else None
    )
    if restoring:
        # A suspended run record was queued and acquired by the restore's claim
        # (``sidecar.run_ledger.claim_record``).
        return await orchestrator.restore(
            team, checkpoint=checkpoint, coordinator=coordinator, journal=journal
        )
    mode = request.WhichOneof("mode")
    if mode == "tasks":
        tasks = convert.tasks_of(request.tasks.tasks)
        return await orchestrator.run_tasks(team, tasks, checkpoint=checkpoint, journal=journal)
    if mode == "plan":
        plan = convert.plan_of(request.plan)
        return await orchestrator.run_from_plan(team, plan, checkpoint=checkpoint, journal=journal)
    return await orchestrator.run_team(
        team,
        request.goal.goal,
        checkpoint=checkpoint,
        coordinator=coordinator,
        plan_only=request.goal.plan_only,
        journal=journal,
    )


class Progress:
    """The tasks and pending approvals of an attempt executing here, as its events tell.

    Progress arrives as synchronous events (``on_progress`` is a plain callback), so it cannot
    wait for a store write, and the run's durable state is its checkpoint and journal, not the
    registry's record: this is what ``GetRun`` shows while the attempt runs here (the record
    gets the tasks when the attempt ends: ``settled``, or :meth:`fold` on a cancel or failure).
    It starts from the record the attempt's claim wrote.
    """

    def __init__(self, record: RunRecordV1) -> None:
        self.tasks: dict[str, TaskRow] = {task.id: task for task in record.tasks}
        self.pending_approvals: list[str] = []

    def track(self, event: pb.RunEvent) -> None:
        """Keep the task table and the pending approvals current from ``event``."""
        detail = event.WhichOneof("detail")
        if detail == "approval_pending":
            if event.approval_pending.id not in self.pending_approvals:
                self.pending_approvals.append(event.approval_pending.id)
            return
        if detail != "task_status" or not event.task_id:
            return
        task = self.tasks.get(event.task_id)
        if task is None:
            fields = event.data.fields
            title = fields["title"].string_value if "title" in fields else ""
            task = TaskRow(id=event.task_id, title=title)
        self.tasks[event.task_id] = replace(
            task,
            status=event.task_status.status,
            assignee=event.agent or task.assignee,
            result=event.task_status.reason or task.result,
        )

    def fold(self, record: RunRecordV1) -> RunRecordV1:
        """``record`` with this progress's tasks in it (the approvals the attempt waits for
        are its run record's once it suspends)."""
        return replace(record, tasks=tuple(self.tasks.values()))


def observer(
    registry: RunRegistry, tool_host: ToolHost, run_id: str, progress: Progress
) -> Callable[[ProgressEvent], None]:
    """The ``on_progress`` of an attempt: track and log the event, acknowledge what a save
    made durable."""

    def on_progress(event: ProgressEvent) -> None:
        message = event_message(event)
        progress.track(message)
        registry.emit(run_id, message)
        if isinstance(event, CheckpointSaved) and event.committed:
            # The save outcome itself says which commit records are durable now.
            tool_host.on_saved(event.run_id or run_id, event.task_id, event.committed)

    return on_progress


def finished(result: TeamRunResult) -> tuple[WireStatus, Outcome]:
    """The run status and outcome a finished attempt leaves."""
    status = STATUS_OF_CODE.get(result.status.code, pb.RUN_STATUS_FAILED)
    return status, Outcome(code=result.status.code, message=result.status.message or "")


def cancel_outcome(reason: str) -> Outcome:
    """The outcome of a run cancelled by ``CancelRun`` with ``reason`` (kept as the message)."""
    return Outcome(code="cancelled", message=reason)


def cancelled_tasks(reason: str) -> Callable[[RunRecordV1], RunRecordV1]:
    """The record change ending the tasks a cancel left in progress: failed, with the reason."""
    result = f"cancelled: {reason}" if reason else "cancelled"

    def change(record: RunRecordV1) -> RunRecordV1:
        tasks = tuple(
            replace(task, status=pb.TASK_STATUS_FAILED, result=result)
            if task.status == pb.TASK_STATUS_IN_PROGRESS
            else task
            for task in record.tasks
        )
        return replace(record, tasks=tasks)

    return change


def settled(result: TeamRunResult) -> Callable[[RunRecordV1], RunRecordV1]:
    """The record change storing a finished attempt's result and tasks (the approvals a
    suspended one waits for are in its run record: ``settle``)."""
    attempt_result = attempt_result_from(result)
    tasks = tuple(task_row_from_state(task) for task in result.tasks)

    def change(record: RunRecordV1) -> RunRecordV1:
        return replace(
            record, result=attempt_result, tasks=tasks, attempt=max(record.attempt, result.attempt)
        )

    return change

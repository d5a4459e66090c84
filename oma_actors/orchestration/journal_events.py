"""A run's journal events besides its conversations (spec 17.2): plan, tasks, approvals, memory.

``RunJournaling`` records the conversations (messages, tool calls and results, turns, model
requests); this module records what the run learns elsewhere, at the moment it happens:

* ``run/start`` then ``plan/set`` (source ``initial``) when a fresh run starts; ``run/start`` with
  mode ``restore`` when a restore continues a run, then an ``approval/decision`` for each decision
  the restore reconciled from the ledger (one the snapshot did not hold yet);
* ``task/status`` from the queue's progress events, so cascades appear: ``TaskStarted`` is
  ``in_progress``, ``TaskCompleted`` ``completed``, ``TaskFailed`` ``failed`` and ``TaskSkipped``
  ``skipped``, each failure or skip with its reason;
* ``approval/request`` when ``ApprovalPending`` is announced, i.e. once the request is durable;
* ``memory/set`` when a value (a task's result) is written to the team's shared memory;
* ``run/end`` on every exit path (``finish_journal``).

The fold (``checkpoint.fold``) carries two of them, so that neither forces a snapshot in
journal-first mode (D14): a task's start (``task/status`` ``in_progress`` with the queue's
``updatedAt``) and a completion's announcement (``task/status`` ``completed``). The others are
written at compaction points, whose snapshot holds them.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from oma_actors.approvals.records import decision_to_json, request_to_json
from oma_actors.clock import to_iso
from oma_actors.events import (
    ApprovalPending,
    TaskCompleted,
    TaskFailed,
    TaskRetry,
    TaskSkipped,
    TaskStarted,
)
from oma_actors.journal import vocabulary as v

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from oma_actors.domain.approvals import ApprovalDecision
    from oma_actors.domain.results import RunOutcome
    from oma_actors.domain.tasks import TaskState
    from oma_actors.events import ProgressEvent
    from oma_actors.orchestration.journaling import RunJournaling
    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.shared_memory import SharedMemory

    Emit = Callable[[ProgressEvent], None]


def start_fresh(
    journaling: RunJournaling, *, mode: str, goal: str | None, queue: TaskQueue
) -> None:
    """``run/start`` and the initial ``plan/set`` of a fresh run (revision: the queue's)."""
    record_start(journaling, mode=mode, goal=goal)
    record_plan(journaling, queue)


def record_start(journaling: RunJournaling, *, mode: str, goal: str | None) -> None:
    """``run/start`` of a fresh run (``run_team`` records it before asking its coordinator)."""
    journaling.recorder.emit(v.run_started(mode=mode, goal=goal))


def record_plan(journaling: RunJournaling, queue: TaskQueue) -> None:
    """The initial ``plan/set`` (revision: the queue's), once the run's plan is known."""
    tasks = [_plan_task(task) for task in queue.tasks]
    journaling.recorder.emit(
        v.plan_set(revision=queue.plan.revision, source="initial", tasks=tasks)
    )


def start_restore(
    journaling: RunJournaling,
    *,
    goal: str | None,
    decisions: Sequence[ApprovalDecision],
    known: Sequence[ApprovalDecision],
    identity: dict[str, Any] | None = None,
) -> None:
    """``run/start`` (mode ``restore``), then each decision reconciled that is not in ``known``.

    ``identity``: the attempt's, when its admission is this append (journal-first, D14).
    """
    recorder = journaling.recorder
    recorder.emit(v.run_started(mode="restore", goal=goal, identity=identity))
    held = {decision.request_id for decision in known}
    for decision in decisions:
        if decision.request_id not in held:
            recorder.emit(v.approval_decided(decision=decision_to_json(decision)))


def record_resumed(
    journaling: RunJournaling,
    queue: TaskQueue,
    resume: Mapping[str, tuple[str, object]],
    restored: Sequence[TaskState] = (),
) -> None:
    """A journal-first restore's re-admitted tasks: ``task/status`` ``in_progress`` with stamp.

    The restore returned each in-progress task to pending (TQ-13, a fresh ``updatedAt``) and
    its admission writes the ones with a conversation to resume as in progress again: these
    events carry that stamp, so the fold restores the tasks exactly and the admission needs no
    snapshot (D14).
    """
    for task_id, (agent, _) in resume.items():
        task = queue.get(task_id)
        if task.status == "pending":
            journaling.recorder.emit(
                _status(task_id, "in_progress", agent=agent, updated_at=to_iso(task.updated_at))
            )
    for task in restored:
        # ``restored``: the tasks as the restored state holds them. One the restore returned
        # to pending with no conversation to resume has no event: its admission compacts.
        if task.status == "in_progress" and task.id not in resume:
            journaling.recorder.uncarried(f"task {task.id!r} returned to pending")


def observing(journaling: RunJournaling | None, emit: Emit, queue: TaskQueue | None = None) -> Emit:
    """``emit`` that also records the run's task and approval events (then passes them on).

    ``queue``: the run's queue, whose stamp of a task's start a journal-first run records.
    """
    if journaling is None:
        return emit

    def observe(event: ProgressEvent) -> None:
        # Recording is best-effort like every journal append (JR-06): never breaks the run.
        with contextlib.suppress(Exception):
            record_progress(journaling, event, queue)
        emit(event)

    return observe


def record_progress(
    journaling: RunJournaling, event: ProgressEvent, queue: TaskQueue | None = None
) -> None:
    """Record what ``event`` tells the journal, if anything.

    Journal-first (D14), a task's start carries the queue's ``updatedAt``: the fold then puts
    the task in progress exactly as the queue has it, and the start needs no snapshot.
    TaskStarted is emitted right after ``TaskQueue.start``, so the queue holds that very stamp.
    """
    recorder = journaling.recorder
    if isinstance(event, TaskStarted):
        stamp = None
        if journaling.durable and queue is not None:
            stamp = to_iso(queue.get(event.task_id).updated_at)
        recorder.emit(_status(event.task_id, "in_progress", agent=event.agent, updated_at=stamp))
    elif isinstance(event, TaskCompleted):
        recorder.emit(_status(event.task_id, "completed", agent=event.agent))
    elif isinstance(event, TaskFailed):
        journaling.turn_failed(event.task_id)
        recorder.emit(_status(event.task_id, "failed", agent=event.agent, reason=event.error))
    elif isinstance(event, TaskSkipped):
        recorder.emit(_status(event.task_id, "skipped", reason=event.reason))
    elif isinstance(event, TaskRetry):
        journaling.turn_failed(event.task_id)  # the attempt's model call failed
    elif isinstance(event, ApprovalPending):
        request = event.request
        content = request.content
        scope: dict[str, Any] = {}
        if isinstance(content.get("taskId"), str):
            scope["task_id"] = content["taskId"]
        if isinstance(content.get("agentName"), str):
            scope["agent_name"] = content["agentName"]
        recorder.emit(v.approval_requested(request=request_to_json(request), **scope))


def watch_memory(journaling: RunJournaling | None, memory: SharedMemory | None) -> None:
    """Record each write to the run's shared memory as ``memory/set``."""
    if journaling is None or memory is None:
        return
    recorder = journaling.recorder

    def written(agent: str, key: str, size: int) -> None:
        recorder.emit(v.memory_set(agent=agent, key=key, value_bytes=size, agent_name=agent))

    memory.on_write = written


async def finish_journal(journaling: RunJournaling | None, status: RunOutcome) -> None:
    """Record how the attempt ended (``run/end``) and wait until the journal has it all.

    ``status`` is the attempt's real outcome (``run_status`` of the queue when the run set
    none), so a run whose tasks failed ends ``error`` with its message, not ``ok``.
    """
    if journaling is None:
        return
    journaling.recorder.emit(
        v.run_ended(status=status.code, error=status.message if status.code != "ok" else None)
    )
    # Held events of a snapshot that never became durable stay out (see JournalRecorder).
    journaling.release_trailing()
    await journaling.recorder.flush()


def _status(
    task_id: str,
    status: str,
    *,
    agent: str | None = None,
    reason: str | None = None,
    updated_at: str | None = None,
) -> v.EventDraft:
    scope: dict[str, Any] = {"agent_name": agent} if agent else {}
    return v.task_status(
        task_id=task_id, status=status, reason=reason, updated_at=updated_at, **scope
    )


def _plan_task(task: TaskState) -> dict[str, Any]:
    """One task of ``plan/set``: ``{taskId, description?, assignee?, dependsOn?}``."""
    out: dict[str, Any] = {"taskId": task.id}
    if task.description:
        out["description"] = task.description
    if task.assignee is not None:
        out["assignee"] = task.assignee
    if task.depends_on:
        out["dependsOn"] = list(task.depends_on)
    return out

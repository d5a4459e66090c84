"""A run's journal events besides its conversations (spec 17.2): plan, tasks, approvals, memory.

``RunJournaling`` records the conversations (messages, tool calls and results, turns, model
requests); this module records what the run learns elsewhere, at the moment it happens:

* ``run/start`` then ``plan/set`` (source ``initial``) when a fresh run starts; ``run/start`` with
  mode ``restore`` when a restore continues a run, then an ``approval/decision`` for each decision
  the restore reconciled from the ledger (one the snapshot did not hold yet);
* ``task/status`` from the facts the run reports as its queue changes (``run_facts``), so
  cascades appear: ``Started`` is ``in_progress``, ``Announced`` ``completed``, ``Failed``
  ``failed`` and ``Skipped`` ``skipped``, each failure or skip with its reason;
* ``approval/request`` when a request is ``Requested``, i.e. once it is durable and announced;
* ``memory/set`` when a value (a task's result) is written to the team's shared memory;
* ``run/end`` on every exit path (``finish_journal``; ``ends_on_raise`` for a raise or a
  cancellation, status ``aborted``).

The fold (``checkpoint.fold``) carries two of them, so that neither forces a snapshot in
journal-first mode (D14): a task's start (``task/status`` ``in_progress`` with the queue's
``updatedAt``) and a completion's announcement (``task/status`` ``completed``). The others are
written at compaction points, whose snapshot holds them. Two facts have no event at all (a task
a dispatch gate held back after its assignment, an approval used up): each makes the writer's
next save compact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, assert_never

from oma_actors.approvals.records import decision_to_json, request_to_json
from oma_actors.clock import to_iso
from oma_actors.journal import vocabulary as v
from oma_actors.orchestration.run_facts import (
    Announced,
    ApprovalUsedUp,
    Failed,
    HeldBack,
    Requested,
    RunFact,
    Skipped,
    Started,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from oma_actors.domain.approvals import ApprovalDecision
    from oma_actors.domain.results import RunOutcome
    from oma_actors.domain.tasks import TaskState
    from oma_actors.orchestration.journaling import RunJournaling
    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.shared_memory import SharedMemory


logger = logging.getLogger(__name__)


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


def record_run_fact(journaling: RunJournaling | None, fact: RunFact) -> None:
    """Record ``fact``, which the run's queue or approval gate reports as it happens (D14).

    Best-effort like every journal append (JR-06): never raises, never breaks the run. A fact
    that could not be recorded is not in the journal, so the writer's next save must not lean
    on the journal for it: it compacts, and the whole snapshot holds the fact.
    """
    if journaling is None:
        return
    try:
        _record(journaling, fact)
    except Exception as exc:
        logger.warning("a run fact could not be journaled (%r): %s", fact, exc)
        with contextlib.suppress(Exception):
            journaling.recorder.uncarried(f"{type(fact).__name__} could not be journaled: {exc}")


def _record(journaling: RunJournaling, fact: RunFact) -> None:
    recorder = journaling.recorder
    match fact:
        case Started(task_id=task_id, agent=agent, updated_at=updated_at):
            stamp = to_iso(updated_at) if journaling.durable else None
            recorder.emit(_status(task_id, "in_progress", agent=agent, updated_at=stamp))
        case Announced(task_id=task_id, agent=agent):
            recorder.emit(_status(task_id, "completed", agent=agent))
        case Failed(task_id=task_id, agent=agent, error=error):
            journaling.turn_failed(task_id)
            recorder.emit(_status(task_id, "failed", agent=agent, reason=error))
        case Skipped(task_id=task_id, reason=reason):
            recorder.emit(_status(task_id, "skipped", reason=reason))
        case Requested(request=request):
            content = request.content
            scope: dict[str, Any] = {}
            if isinstance(content.get("taskId"), str):
                scope["task_id"] = content["taskId"]
            if isinstance(content.get("agentName"), str):
                scope["agent_name"] = content["agentName"]
            recorder.emit(v.approval_requested(request=request_to_json(request), **scope))
        case HeldBack(task_id=task_id, agent=agent):
            recorder.uncarried(f"task {task_id!r} was assigned to {agent!r}")
        case ApprovalUsedUp(request_id=request_id):
            recorder.uncarried(f"approval {request_id!r} was used up")
        case _:
            assert_never(fact)


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
    journaling.end(status.code, status.message if status.code != "ok" else None)
    # Held events of a snapshot that never became durable stay out (see JournalRecorder).
    journaling.release_trailing()
    await journaling.recorder.flush()


ABORT_FLUSH_S = 5.0
"""How long an attempt that raised waits for its ``run/end`` to land before the error goes on."""


@contextlib.asynccontextmanager
async def ends_on_raise(journaling: RunJournaling | None) -> AsyncIterator[None]:
    """Around an attempt's work: whatever escapes it (a cancellation too) ends the journal.

    The ``run/end`` lands before the error goes on (up to ``ABORT_FLUSH_S``; another
    cancellation stops the wait): a restore started right after in this process reads the
    journal's tail to number its events, and an append still in flight would land under a seq
    it numbers too. The error goes on unchanged; a ``run/end`` already recorded stands.
    """
    try:
        yield
    except BaseException as error:
        if journaling is not None:
            journaling.abort(error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(journaling.recorder.flush()), ABORT_FLUSH_S)
        raise


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

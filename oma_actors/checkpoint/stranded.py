"""Failing closed a task whose dispatched call a restore cannot resume (issues 18, 19). Pure.

A restore must never run again an ``unsafe`` call whose dispatch was recorded (decision D1). It
keeps that promise by marking the call dispatched in its task's in-flight entry, so the runner
answers it ``TOOL_OUTCOME_UNKNOWN`` instead of running it (``mark_started_unsafe``). That needs
the call in the entry. When the events that put it there are gone (a journal that lost its tail,
a damaged or discarded tail holding the task's first turns) the task would start its
conversation over, and the model would be asked again for a call that already ran.

Such a task is **stranded**: its entry becomes a completed, unsuccessful, non-retryable runner
state whose output names the calls, so the task fails without a model call and without running
any of them; the reviewer checks their effects. The rest of the run goes on. A call counts as
resumable when its task is finished, or when its entry's conversation holds the call (pending,
or answered before the snapshot was taken).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.domain.inflight import RunnerState
from oma_actors.domain.messages import Message, TextBlock, ToolUseBlock
from oma_actors.domain.snapshot import InFlightTask

if TYPE_CHECKING:
    from collections.abc import Collection

    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.journal.fold import StartedCall

OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
"""The code a stranded task's output starts with (``agents.tool_calls.OUTCOME_UNKNOWN``; the
checkpoint layer sits below the agents)."""


def strand_unresumable(
    snapshot: CheckpointSnapshot, calls: Collection[StartedCall]
) -> tuple[CheckpointSnapshot, tuple[StartedCall, ...]]:
    """``snapshot`` with every task that cannot resume one of ``calls`` ended as failed.

    Args:
        snapshot: the restored state (tail folded or discarded, dispatch marks applied).
        calls: calls that must never run again (dispatched unsafe calls, or every started call
            of a salvaged tail).

    Returns:
        The snapshot, and the calls that stranded their task (for ``ToolOutcomeUnknown``).
    """
    tasks = {task.id: task for task in snapshot.tasks}
    entries = {(entry.task_id, entry.assignee): entry for entry in snapshot.in_flight}
    stranded: dict[tuple[str, str], list[StartedCall]] = {}
    for call in calls:
        task = tasks.get(call.task_id or "")
        if task is None or task.is_terminal or call.agent_name is None:
            continue  # no task of the queue (a coordinator's call), or nothing left to run
        if task.assignee is not None and task.assignee != call.agent_name:
            continue  # a delegated child's call: its conversation is never in a snapshot
        entry = entries.get((task.id, call.agent_name))
        if entry is not None and _holds(entry.state, call.call_id):
            continue
        lost = stranded.setdefault((task.id, call.agent_name), [])
        if all(known.call_id != call.call_id for known in lost):  # the tail and a mark
            lost.append(call)
    if not stranded:
        return snapshot, ()
    new_entries = list(snapshot.in_flight)
    new_tasks = dict(tasks)
    for (task_id, agent), lost in stranded.items():
        task = tasks[task_id]
        entry = entries.get((task_id, agent))
        ids = ", ".join(sorted({call.call_id for call in lost}))
        output = (
            f"{OUTCOME_UNKNOWN}: tool call(s) {ids} of task {task_id!r} were dispatched, but "
            "the journal lost the part of the conversation that issued them; the task is not "
            "run again. Check the calls' effects before retrying it."
        )
        if entry is None:
            prompt = Message("user", [TextBlock(f"# Task: {task.title}\n\n{task.description}")])
            state = RunnerState(phase="completed", conversation=(prompt,))
            failed = InFlightTask(
                task_id=task_id,
                assignee=agent,
                state=_failed(state, output),
                journal_seq=snapshot.journal_watermark_seq,
            )
            new_entries.append(failed)
        else:
            failed = replace(entry, state=_failed(entry.state, output))
            new_entries[new_entries.index(entry)] = failed
        if task.status != "in_progress" or task.assignee != agent:
            new_tasks[task_id] = replace(task, status="in_progress", assignee=agent)
    changed = replace(
        snapshot,
        in_flight=tuple(new_entries),
        tasks=tuple(new_tasks[task.id] for task in snapshot.tasks),
    )
    return changed, tuple(call for calls_of in stranded.values() for call in calls_of)


def _holds(state: RunnerState, call_id: str) -> bool:
    """Whether the conversation (or the pending turn) holds the call ``call_id``."""
    if any(item.call.id == call_id for item in state.pending):
        return True
    return any(
        isinstance(block, ToolUseBlock) and block.id == call_id
        for message in state.conversation
        if message.role == "assistant"
        for block in message.content
    )


def _failed(state: RunnerState, output: str) -> RunnerState:
    """``state`` ended: unsuccessful, never retried (a retry would start it over)."""
    return replace(
        state, phase="completed", pending=(), final_output=output, success=False, retryable=False
    )


__all__ = ["strand_unresumable"]

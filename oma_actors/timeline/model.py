"""The run timeline: what happened in a run, as one frozen value built from its state.

``build_timeline(snapshot, events)`` reads a checkpoint snapshot and, when the run kept one, its
journal. The journal is the timeline's source (it says which attempt did what); a run without a
journal shows what the snapshot holds, and then a restored call cannot be told apart from one
that ran once, so every committed call reads ``executed``.

A tool call's mark (``CallMark``):

- ``executed``: it ran, and its result was committed in the attempt that issued it.
- ``replayed``: committed in one attempt, the attempt ended before the turn closed, and a later
  attempt reused the committed result without running the tool (spec RN-06).
- ``re-ran``: it had no commit when its attempt ended, was neither started as an ``unsafe``
  call (``tool/call`` before that attempt ended) nor held by an approval, and a later attempt
  committed it: it ran again with the same ``tool_call_id``.
- ``settled``: an ``unsafe`` call started in one attempt (its ``tool/call``) and committed by a
  later one: it was never run again, the tool's ``reconcile`` reported what happened.
- ``outcome unknown``: the same, but the commit is an error (``reconcile`` could not say, the
  model was told ``TOOL_OUTCOME_UNKNOWN``), or started in an attempt that ended without a
  result and not settled yet (or a snapshot alone holds it dispatched).
- ``rejected``: its approval was rejected (``approval/decision``); it never ran.
- ``running``: started in the current attempt, no result yet (a host call waiting for a host).
- ``awaiting approval``: suspended on an undecided approval.
- ``pending``: issued, not run yet (it runs on the next restore).

The marks come from the journal's facts (a call's ``tool/call`` dispatch, its ``tool/result``
commit, the ``approval/request`` and ``approval/decision`` of its approval, the
``user/message`` that closed its turn), never from a result's text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oma_actors.readable import to_iso
from oma_actors.timeline.journal_view import JournalView
from oma_actors.timeline.merge import merge_turns
from oma_actors.timeline.text import summarize
from oma_actors.timeline.values import (
    Timeline,
    TimelineApproval,
    TimelineFork,
    TimelineLane,
    TimelineTurn,
    call_from_state,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.checkpoint import CheckpointSnapshot
    from oma_actors.domain import Message, TaskState, TokenUsage
    from oma_actors.domain.inflight import PendingCall
    from oma_actors.journal import JournalEvent


def build_timeline(
    snapshot: CheckpointSnapshot, events: Sequence[JournalEvent] | None = None
) -> Timeline:
    """The timeline of the run ``snapshot`` belongs to; ``events`` is its journal, if any.

    Args:
        snapshot: The run's latest checkpoint snapshot.
        events: The run's journal events (``read_from(0)``); other runs' events are ignored.
    """
    view = JournalView(snapshot.run_id, events) if events else None
    lanes = tuple(_lane(snapshot, task, view) for task in snapshot.tasks)
    return Timeline(
        run_id=snapshot.run_id,
        attempt=snapshot.attempt,
        revision=snapshot.revision,
        status=_run_status(snapshot),
        from_journal=view is not None,
        lanes=lanes,
        approvals=_approvals(snapshot),
        forked_from=(
            None
            if snapshot.forked_from is None
            else TimelineFork(run_id=snapshot.forked_from.run_id, seq=snapshot.forked_from.seq)
        ),
    )


def _run_status(snapshot: CheckpointSnapshot) -> str:
    """The run's status by the snapshot's own rule (the one ``oma checkpoint list`` shows).

    A run is ``failed`` (or ``rejected``) only when every task is terminal: a failed task with
    work still pending, in progress or blocked (a failure a plan revision recovered, TQ-07) is
    ``in progress``, and once the revision's tasks completed the run is ``completed`` (TQ-07
    ignores the failure it recovered and the tasks it superseded). The timeline spells
    ``in_progress`` with a space, as it always has.
    """
    status: str = snapshot.status
    return "in progress" if status == "in_progress" else status


def _lane(snapshot: CheckpointSnapshot, task: TaskState, view: JournalView | None) -> TimelineLane:
    done = next((c for c in snapshot.completed if c.task_id == task.id), None)
    flight = next((f for f in snapshot.in_flight if f.task_id == task.id), None)
    pending = {item.call.id: item for item in flight.state.pending} if flight else {}
    usage: TokenUsage | None = None
    messages: Sequence[Message] = ()
    if done is not None and done.agent_result is not None:
        usage, messages = done.agent_result.token_usage, done.agent_result.messages
    elif flight is not None:
        usage, messages = flight.state.token_usage, flight.state.messages
    turns = _snapshot_turns(messages, pending)
    attempts: tuple[int, ...] = ()
    if view is not None and view.has_task(task.id):
        journaled = view.turns(task.id, pending, snapshot.attempt)
        turns = merge_turns(turns, journaled, view.results(task.id), view.starts(task.id))
        known = {t.attempt for t in turns if t.attempt is not None}
        attempts = tuple(sorted(known | set(view.attempts(task.id))))
    in_tok = usage.input_tokens if usage else sum(t.input_tokens or 0 for t in turns)
    out_tok = usage.output_tokens if usage else sum(t.output_tokens or 0 for t in turns)
    return TimelineLane(
        task_id=task.id,
        title=task.title,
        status=task.status,
        assignee=task.assignee,
        attempts=attempts,
        turns=turns,
        input_tokens=in_tok,
        output_tokens=out_tok,
    )


def _snapshot_turns(
    messages: Sequence[Message], pending: dict[str, PendingCall]
) -> tuple[TimelineTurn, ...]:
    """Turns from a snapshot's messages: no attempts and no per-turn usage are known there."""
    results: dict[str, tuple[str, bool]] = {}
    for message in messages:
        for block in message.content:
            if block.type == "tool_result":
                results[block.tool_use_id] = (summarize(block.content), block.is_error)
    turns: list[TimelineTurn] = []
    for message in messages:
        if message.role != "assistant":
            continue
        calls = tuple(
            call_from_state(block.id, block.name, results.get(block.id), pending.get(block.id))
            for block in message.content
            if block.type == "tool_use"
        )
        text = " ".join(b.text for b in message.content if b.type == "text")
        turns.append(TimelineTurn(index=len(turns) + 1, attempt=None, text=summarize(text),
                                  input_tokens=None, output_tokens=None, calls=calls))  # fmt: skip
    return tuple(turns)


def _approvals(snapshot: CheckpointSnapshot) -> tuple[TimelineApproval, ...]:
    decided = {d.request_id: d for d in snapshot.approval_decisions}
    requests: dict[str, Any] = {r.id: r for r in snapshot.pending_approvals}
    for flight in snapshot.in_flight:
        for item in flight.state.pending:
            if item.approval_request is not None:
                requests.setdefault(item.approval_request.id, item.approval_request)
    rows: list[TimelineApproval] = []
    for request_id, request in requests.items():
        decision = decided.get(request_id)
        rows.append(
            TimelineApproval(
                request_id=request_id,
                scope=str(request.scope),
                task_id=_str(request.content.get("taskId")),
                tool_call_id=_str(request.content.get("toolCallId")),
                reason=request.reason,
                requested_at=to_iso(request.requested_at),
                decision=None if decision is None else decision.decision,
                reviewer=None if decision is None else decision.reviewer.id,
                decided_at=None if decision is None else to_iso(decision.decided_at),
            )
        )
    for request_id, decision in decided.items():
        if request_id not in requests:
            rows.append(TimelineApproval(
                request_id=request_id, scope=str(decision.scope), task_id=None,
                tool_call_id=None, reason=None, requested_at="", decision=decision.decision,
                reviewer=decision.reviewer.id, decided_at=to_iso(decision.decided_at),
            ))  # fmt: skip
    return tuple(rows)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None

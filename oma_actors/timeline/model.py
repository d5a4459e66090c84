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
  model was told ``TOOL_OUTCOME_UNKNOWN``), or in flight when its attempt ended (cancelled,
  interrupted, crashed) without a result and not settled yet (or a snapshot alone holds it
  dispatched).
- ``rejected``: its approval was rejected (``approval/decision``); it never ran.
- ``running``: in flight in the live attempt (started, no result yet): an ``unsafe`` call's
  ``tool/call`` is its start, and a turn's other calls run as soon as the answer that issued
  them is saved (their ``tool/call`` comes only with their result), so an uncommitted call of
  the live attempt's open turn that no approval holds is running too (a host call waiting for
  a host). The live attempt is the one whose ``run/start`` no ``run/end`` followed.
- ``awaiting approval``: suspended on an undecided approval.
- ``pending``: issued, not run yet (it runs on the next restore).

The marks come from the journal's facts (a call's ``tool/call`` dispatch, its ``tool/result``
commit, the ``approval/request`` and ``approval/decision`` of its approval, the
``user/message`` that closed its turn, the attempt's ``run/end``), never from a result's text.

The run's status is the snapshot's, unless the run ended after it: the run record's (given as
``record``: ``cancelled`` by an operator, ``failed``), else the last attempt's ``run/end``
when no snapshot of a later attempt follows it (code ``aborted``: ``cancelled``, or
``interrupted`` when a stopping sidecar aborted it to continue in another attempt; ``error``
and the like: ``failed``). A task such an end left in progress reads as ``GetRun`` shows it
(``failed``, ``cancelled: <reason>``), and its calls in flight read ``outcome unknown``.

A task retried after a failed try (``max_retries``) shows every try: the failed try's turns
(the last one with the ``error`` its ``turn/end`` recorded), then the retry's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from oma_actors.readable import to_iso
from oma_actors.timeline.journal_view import ApprovalFacts, JournalView, approval_facts
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
    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.inflight import PendingCall
    from oma_actors.journal import JournalEvent
    from oma_actors.runs import RunRecord, RunSummary

STOPPING = "the sidecar stopped while the run was running; it continues in another attempt"
"""The ``run/end`` message of an attempt a stopping sidecar aborted (``sidecar.attempt.STOPPING``,
which ``oma_actors`` may not import): the run was interrupted, not cancelled."""


@dataclass(frozen=True, slots=True)
class _Fate:
    """How the run ended after its snapshot: status, message, what its in-progress tasks read."""

    status: str
    reason: str | None
    task_status: str | None  # what a task left in progress reads (None: it stays in progress)
    task_reason: str


def build_timeline(
    snapshot: CheckpointSnapshot,
    events: Sequence[JournalEvent] | None = None,
    *,
    record: RunRecord | RunSummary | None = None,
) -> Timeline:
    """The timeline of the run ``snapshot`` belongs to; ``events`` is its journal, if any.

    Args:
        snapshot: The run's latest checkpoint snapshot.
        events: The run's journal events (``read_from(0)``); other runs' events are ignored,
            but a fork's parent's events up to the fork point, when given, supply the requests
            and decision times of the approvals the fork inherited.
        record: The run's record (``oma_actors.runs``), when the run is owned through a run
            store: a run cancelled or failed after its last snapshot reads so.
    """
    view = JournalView(snapshot.run_id, events) if events else None
    fate = _fate(snapshot, view, record)
    lanes = tuple(_lane(snapshot, task, view, fate) for task in snapshot.tasks)
    return Timeline(
        run_id=snapshot.run_id,
        attempt=snapshot.attempt,
        revision=snapshot.revision,
        status=_run_status(snapshot) if fate is None else fate.status,
        from_journal=view is not None,
        lanes=lanes,
        approvals=_approvals(snapshot, view, _parent_approvals(snapshot, events)),
        forked_from=(
            None
            if snapshot.forked_from is None
            else TimelineFork(run_id=snapshot.forked_from.run_id, seq=snapshot.forked_from.seq)
        ),
        reason=None if fate is None else fate.reason,
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


def _fate(
    snapshot: CheckpointSnapshot, view: JournalView | None, record: RunRecord | RunSummary | None
) -> _Fate | None:
    """How the run ended after its snapshot, or ``None``: the snapshot's status stands.

    Only a snapshot that leaves the run unfinished can be overtaken: the run record's terminal
    status (an operator's cancel, a failure) wins, then the last attempt's ``run/end`` when it
    is not older than the snapshot. ``aborted`` reads as ``GetRun`` reads it: cancelled, unless
    a stopping sidecar wrote it (interrupted: the run continues in another attempt).
    """
    if snapshot.status not in ("in_progress", "suspended"):
        return None
    status = getattr(record, "status", None)
    if status in ("cancelled", "failed"):
        outcome = getattr(record, "outcome", None)
        message = outcome.get("message") if isinstance(outcome, dict) else None
        reason = message if isinstance(message, str) and message else None
        return _ended(str(status), reason)
    if view is None or view.live is not None or not view.ends:
        return None
    attempt = max(view.ends)
    end = view.ends[attempt]
    if attempt < snapshot.attempt or end.code in ("ok", "suspended", ""):
        return None
    if end.code == "aborted" and end.message == STOPPING:
        return _Fate("interrupted", end.message, task_status=None, task_reason="interrupted")
    if end.code == "aborted":
        return _ended("cancelled", end.message)
    return _ended("failed", end.message or end.code)


def _ended(status: str, reason: str | None) -> _Fate:
    word = "cancelled" if status == "cancelled" else "failed"
    return _Fate(status, reason, task_status="failed",
                 task_reason=f"{word}: {reason}" if reason else word)  # fmt: skip


def _lane(
    snapshot: CheckpointSnapshot, task: TaskState, view: JournalView | None, fate: _Fate | None
) -> TimelineLane:
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
    tries = 1
    if view is not None and view.has_task(task.id):
        journaled = view.turns(task.id, pending, snapshot.attempt)
        tries = view.tries(task.id)
        # The snapshot holds the last try's conversation: the earlier tries are the journal's.
        earlier = tuple(t for t in journaled if t.task_try < tries)
        last = tuple(t for t in journaled if t.task_try == tries)
        merged = merge_turns(turns, last, view.results(task.id), view.starts(task.id))
        turns = earlier + tuple(replace(t, task_try=tries) for t in merged)
        known = {t.attempt for t in turns if t.attempt is not None}
        attempts = tuple(sorted(known | set(view.attempts(task.id))))
    in_tok = usage.input_tokens if usage else sum(t.input_tokens or 0 for t in turns)
    out_tok = usage.output_tokens if usage else sum(t.output_tokens or 0 for t in turns)
    status: str = task.status
    reason = None
    if fate is not None and status == "in_progress":
        # Its attempt ended under it: a call in flight may or may not have run.
        status, reason = fate.task_status or status, fate.task_reason
        turns = tuple(_cut(turn) for turn in turns)
    return TimelineLane(
        task_id=task.id,
        title=task.title,
        status=status,
        assignee=task.assignee,
        attempts=attempts,
        turns=turns,
        input_tokens=in_tok,
        output_tokens=out_tok,
        tries=tries,
        reason=reason,
    )


def _cut(turn: TimelineTurn) -> TimelineTurn:
    """``turn`` of a task whose attempt ended under it: a call it had in flight (running, or
    issued and not run yet: a turn's calls all start at once) may or may not have run."""
    if not any(call.mark in ("running", "pending") for call in turn.calls):
        return turn
    calls = tuple(
        replace(call, mark="outcome unknown") if call.mark in ("running", "pending") else call
        for call in turn.calls
    )
    return replace(turn, calls=calls)


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


def _parent_approvals(
    snapshot: CheckpointSnapshot, events: Sequence[JournalEvent] | None
) -> ApprovalFacts | None:
    """A fork's parent's approval events up to the fork point, when ``events`` hold them."""
    fork = snapshot.forked_from
    if fork is None or not events:
        return None
    facts = approval_facts(fork.run_id, events, through=fork.seq)
    return facts if facts.requests or facts.decisions else None


def _approvals(
    snapshot: CheckpointSnapshot, view: JournalView | None, parent: ApprovalFacts | None
) -> tuple[TimelineApproval, ...]:
    """Every approval the run holds: pending, decided (the snapshot's), or requested and decided
    in its journal. A decided request is no longer in the snapshot (only its decision is): its
    task, call, reason and request time come from its ``approval/request`` (a fork's: its
    parent's, matched by the request's hash)."""
    decided: dict[str, ApprovalDecision] = {d.request_id: d for d in snapshot.approval_decisions}
    requests: dict[str, ApprovalRequest] = {r.id: r for r in snapshot.pending_approvals}
    for flight in snapshot.in_flight:
        for item in flight.state.pending:
            if item.approval_request is not None:
                requests.setdefault(item.approval_request.id, item.approval_request)
            if item.approval_decision is not None:
                decided.setdefault(item.approval_decision.request_id, item.approval_decision)
    journal = view.approvals if view is not None else ApprovalFacts()
    ids = [*requests, *(i for i in decided if i not in requests)]
    ids += [i for i in journal.requests if i not in requests and i not in decided]
    ids += [i for i in journal.decisions if i not in ids]
    forked_from = snapshot.forked_from.run_id if snapshot.forked_from is not None else None
    rows: list[TimelineApproval] = []
    for request_id in ids:
        request, decision = requests.get(request_id), decided.get(request_id)
        raw_request = journal.requests.get(request_id)
        raw_decision = journal.decisions.get(request_id)
        inherited = None
        request_hash = _request_hash(request, decision, raw_request, raw_decision)
        if raw_decision is None and decision is not None and forked_from is not None:
            # Decided in no event of the fork's own: the fork re-bound its parent's decision.
            inherited = forked_from
            if parent is not None and request_hash is not None:
                parent_request, parent_decision = parent.by_hash(request_hash)
                raw_request = raw_request or parent_request
                raw_decision = parent_decision
        rows.append(_row(request_id, request, decision, raw_request, raw_decision, inherited))
    return tuple(rows)


def _request_hash(
    request: ApprovalRequest | None,
    decision: ApprovalDecision | None,
    raw_request: dict[str, Any] | None,
    raw_decision: dict[str, Any] | None,
) -> str | None:
    if request is not None:
        return request.request_hash
    if decision is not None:
        return decision.request_hash
    for raw in (raw_request, raw_decision):
        if raw is not None and isinstance(raw.get("requestHash"), str):
            return str(raw["requestHash"])
    return None


def _row(
    request_id: str,
    request: ApprovalRequest | None,
    decision: ApprovalDecision | None,
    raw_request: dict[str, Any] | None,
    raw_decision: dict[str, Any] | None,
    inherited: str | None,
) -> TimelineApproval:
    """One approval row from what the snapshot holds of it, completed by its journal events."""
    content: dict[str, Any] = {}
    raw = raw_request or {}
    if request is not None:
        content = request.content
    elif isinstance(raw.get("content"), dict):
        content = raw["content"]
    scope = request.scope if request is not None else raw.get("scope")
    if scope is None:
        scope = decision.scope if decision is not None else (raw_decision or {}).get("scope")
    verdict: str | None = None
    reviewer: str | None = None
    decided_at: str | None = None
    edited: dict[str, Any] | None = None
    if decision is not None:
        verdict, reviewer = decision.decision, decision.reviewer.id
        decided_at, edited = to_iso(decision.decided_at), decision.edited_input
    if raw_decision is not None:
        verdict = verdict or _str(raw_decision.get("decision"))
        who = raw_decision.get("reviewer")
        reviewer = reviewer or (_str(who.get("id")) if isinstance(who, dict) else None)
        # The journal's decision time is the decision's own (a fork's parent's included).
        decided_at = _str(raw_decision.get("decidedAt")) or decided_at
        if edited is None and isinstance(raw_decision.get("editedInput"), dict):
            edited = raw_decision["editedInput"]
    requested_at = to_iso(request.requested_at) if request is not None else None
    return TimelineApproval(
        request_id=request_id,
        scope=str(scope or ""),
        task_id=_str(content.get("taskId")),
        tool_call_id=_str(content.get("toolCallId")),
        reason=request.reason if request is not None else _str(raw.get("reason")),
        requested_at=requested_at or _str(raw.get("requestedAt")) or "",
        decision=verdict,
        reviewer=reviewer,
        decided_at=decided_at,
        edited_input=edited,
        inherited_from=inherited,
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None

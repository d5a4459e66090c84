"""The timeline's value types (frozen) and the mark a snapshot alone gives a tool call.

See ``model`` for what each mark means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from oma_actors.timeline.text import summarize

if TYPE_CHECKING:
    from oma_actors.domain.inflight import PendingCall

CallMark = Literal[
    "executed",
    "replayed",
    "re-ran",
    "settled",
    "outcome unknown",
    "rejected",
    "running",
    "awaiting approval",
    "pending",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineCall:
    """One tool call: its id, tool, mark, and (when committed) a short result."""

    call_id: str
    tool_name: str
    mark: CallMark
    attempt: int | None = None
    result: str | None = None
    is_error: bool = False
    approval_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineTurn:
    """One model turn of a task: what the model said (shortened), its usage and its calls.

    ``index`` counts the turns of one try of the task, from 1 (the journal's turn number);
    ``task_try`` is that try: 1, then 2 for the retry after a failed try (``max_retries``), and
    so on. ``outcome`` is how the journal says the turn ended (its ``turn/end``: ``error`` when
    its model call failed, ``aborted``, ``completed``, ...), ``None`` when it has not or no
    journal fed the timeline.
    """

    index: int
    attempt: int | None
    text: str
    input_tokens: int | None
    output_tokens: int | None
    calls: tuple[TimelineCall, ...] = ()
    task_try: int = 1
    outcome: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineLane:
    """One task: its status, assignee, the attempts that worked on it, turns and token usage.

    ``attempts`` are the run's attempts (a restore starts the next one) that worked on the task;
    ``tries`` how many times the task was started afresh within them (a failed try retried per
    its ``max_retries``): every try's turns are in ``turns``, in order. ``reason`` says why a
    task that did not complete stopped when the run's end says so (``cancelled: <reason>`` for a
    task a cancelled run left in progress, as ``GetRun`` shows it).
    """

    task_id: str
    title: str
    status: str
    assignee: str | None
    attempts: tuple[int, ...]
    turns: tuple[TimelineTurn, ...]
    input_tokens: int
    output_tokens: int
    tries: int = 1
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineApproval:
    """An approval request: pending, or decided (by whom, when, with what edited input).

    ``inherited_from``: in a fork, the parent run whose decision the fork re-bound to its own
    request (``fork_run``); ``decided_at`` is then the parent's decision time when the parent's
    journal events were given, else the time the fork re-bound it.
    """

    request_id: str
    scope: str
    task_id: str | None
    tool_call_id: str | None
    reason: str | None
    requested_at: str
    decision: str | None = None
    reviewer: str | None = None
    decided_at: str | None = None
    edited_input: dict[str, Any] | None = None
    inherited_from: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineFork:
    """Where a forked run starts (D17): its parent and the parent's history point. Everything
    up to that point is the parent's: its committed results replay, nothing of it runs again."""

    run_id: str
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """A whole run: identity, status, lanes in task order, approvals; whether a journal fed it;
    its parent when it is a fork.

    ``status`` is the snapshot's (``in progress`` spelt with a space), unless the run ended
    after it: ``cancelled``, ``interrupted`` or ``failed`` from the run record or the last
    attempt's ``run/end``; ``reason`` is then that end's message.
    """

    run_id: str
    attempt: int
    revision: int
    status: str
    from_journal: bool
    lanes: tuple[TimelineLane, ...]
    approvals: tuple[TimelineApproval, ...] = ()
    forked_from: TimelineFork | None = None
    reason: str | None = None

    @property
    def calls(self) -> tuple[TimelineCall, ...]:
        """Every tool call of every lane, in lane and turn order."""
        return tuple(call for lane in self.lanes for turn in lane.turns for call in turn.calls)


def call_from_state(
    call_id: str,
    tool_name: str,
    result: tuple[str, bool] | None,
    item: PendingCall | None,
    attempt: int | None = None,
) -> TimelineCall:
    """A call's mark from what a snapshot holds of it: its result, or its pending entry."""
    approval = item.approval_request.id if item and item.approval_request else None
    if item is not None and item.commit is not None:
        result = (summarize(item.commit.block.content), item.commit.block.is_error)
    mark: CallMark
    if result is not None:
        # A snapshot alone cannot say how a result came about (run, reconciled or refused):
        # that takes the journal's facts (journal_view); here it is the committed result.
        mark = "executed"
    elif item is not None and item.awaiting_approval:
        mark = "awaiting approval"
    elif item is not None and item.dispatched:
        mark = "outcome unknown"
    else:
        mark = "pending"
    return TimelineCall(
        call_id=call_id,
        tool_name=tool_name,
        mark=mark,
        attempt=attempt,
        result=None if result is None else result[0],
        is_error=False if result is None else result[1],
        approval_id=approval,
    )

"""The timeline's value types (frozen) and the mark a snapshot alone gives a tool call.

See ``model`` for what each mark means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

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
    """One model turn of a task: what the model said (shortened), its usage and its calls."""

    index: int
    attempt: int | None
    text: str
    input_tokens: int | None
    output_tokens: int | None
    calls: tuple[TimelineCall, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineLane:
    """One task: its status, assignee, the attempts that worked on it, turns and token usage."""

    task_id: str
    title: str
    status: str
    assignee: str | None
    attempts: tuple[int, ...]
    turns: tuple[TimelineTurn, ...]
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineApproval:
    """An approval request: pending, or decided (by whom, when)."""

    request_id: str
    scope: str
    task_id: str | None
    tool_call_id: str | None
    reason: str | None
    requested_at: str
    decision: str | None = None
    reviewer: str | None = None
    decided_at: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineFork:
    """Where a forked run starts (D17): its parent and the parent's history point. Everything
    up to that point is the parent's: its committed results replay, nothing of it runs again."""

    run_id: str
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """A whole run: identity, status, lanes in task order, approvals; whether a journal fed it;
    its parent when it is a fork."""

    run_id: str
    attempt: int
    revision: int
    status: str
    from_journal: bool
    lanes: tuple[TimelineLane, ...]
    approvals: tuple[TimelineApproval, ...] = ()
    forked_from: TimelineFork | None = None

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

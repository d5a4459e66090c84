"""How one journal event changes one in-flight entry (spec JR-14, JR-15, JR-16). No I/O.

Each rule takes an entry and an event of that entry's task and agent above its mark, and returns
the next entry, or raises ``TailRejected`` with the reason when the event does not fit the state:
then the whole tail is discarded (JR-16), never part of it. The transitions are the runner's
(``agents/turn.py``), restated over journal events because the checkpoint layer sits below the
agents: an assistant message opens a tool round with its calls pending, a ``tool/result`` commits
one call, the user message with the results closes the round.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors.checkpoint.context_layout import replaced
from oma_actors.domain.inflight import PendingCall, RunnerState, ToolCommit
from oma_actors.domain.jsonforms import (
    block_from_json,
    message_from_json,
    record_from_json,
    usage_from_json,
)
from oma_actors.domain.messages import Message, ToolResultBlock, ToolUseBlock, text_of
from oma_actors.domain.results import ToolCallRecord
from oma_actors.errors import CheckpointError
from oma_actors.journal.event import (
    ASSISTANT_MESSAGE,
    CONTEXT_REPLACE,
    FOLDED_TYPES,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
)

if TYPE_CHECKING:
    from oma_actors.checkpoint.snapshot import InFlightTask
    from oma_actors.journal.event import JournalEvent

__all__ = ["FOLDED_TYPES", "TailRejected", "apply_event", "check_resumable"]


class TailRejected(Exception):
    """A journal event failed a fold check: the tail is discarded (spec JR-16)."""

    def __init__(self, reason: str, seq: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seq = seq


def apply_event(item: InFlightTask, event: JournalEvent, *, enforce_lineage: bool) -> InFlightTask:
    """``item`` after ``event`` (one of ``FOLDED_TYPES``), its mark not yet advanced.

    Raises:
        TailRejected: the event does not fit the entry (the reason names the rule).
    """
    try:
        if event.type == ASSISTANT_MESSAGE:
            return _assistant(item, event, enforce_lineage=enforce_lineage)
        if event.type == USER_MESSAGE:
            return _user(item, event, enforce_lineage=enforce_lineage)
        if event.type == TOOL_CALL:
            return _tool_call(item, event)
        if event.type == TOOL_RESULT:
            return _tool_result(item, event)
        if event.type == CONTEXT_REPLACE:
            if item.state.phase != "awaiting_model":
                raise TailRejected(
                    f"{_where(item, event)} arrives at {item.state.phase}: a strategy rewrites "
                    "the conversation only before a model call",
                    event.seq,
                )
            return replaced(item, event)
        turn = event.data["turn"]
        if not isinstance(turn, int) or isinstance(turn, bool):
            raise TypeError(f"turn {turn!r} is not an integer")
        if event.data.get("outcome") == "error":
            # The model call failed: the turn it names was opened, never counted (RN-05).
            return item
        return replace(item, state=replace(item.state, turns=max(item.state.turns, turn)))
    except (KeyError, TypeError, ValueError, AttributeError, CheckpointError) as exc:
        where = f"{event.type} at seq {event.seq}"
        raise TailRejected(f"{where} is malformed: {exc!r}", event.seq) from None


def check_resumable(item: InFlightTask) -> None:
    """Refuse a folded entry the runner cannot resume from (spec JR-16).

    At ``awaiting_model`` the next step sends the conversation to the model, so it may not end
    with an assistant message (the model would be asked to answer itself).
    """
    state = item.state
    if state.phase == "awaiting_model" and state.conversation[-1].role == "assistant":
        raise TailRejected(
            f"task {item.task_id!r} would end at awaiting_model after an assistant message: "
            "the runner cannot resume from that state",
            item.journal_seq,
        )


def _where(item: InFlightTask, event: JournalEvent) -> str:
    return f"{event.type} at seq {event.seq} (task {item.task_id!r})"


def _message(event: JournalEvent, role: str, *, enforce_lineage: bool) -> Message:
    message = message_from_json(event.data["message"])
    if message.role != role:
        raise ValueError(f"message role {message.role!r} is not {role!r}")
    # A prompt or a seeded message is where lineage starts; everything else names its sources.
    origin = event.data.get("origin")
    if enforce_lineage and origin not in ("input", "seed") and not event.source_event_seqs:
        raise TailRejected(
            f"{event.type} at seq {event.seq} names no source events (sourceEventSeqs) and "
            "enforce_lineage is on",
            event.seq,
        )
    return message


def _appended(item: InFlightTask, state: RunnerState, message: Message, seq: int) -> InFlightTask:
    """``item`` with ``state`` whose conversation gained ``message`` (from event ``seq``)."""
    lineage = item.conversation_lineage
    if lineage is not None:
        # Every block of a folded message comes from the event that carried it (JR-07).
        lineage = (*lineage, tuple((seq,) for _ in message.content))
    state = replace(
        state, conversation=(*state.conversation, message), messages=(*state.messages, message)
    )
    return replace(item, state=state, conversation_lineage=lineage)


def _assistant(item: InFlightTask, event: JournalEvent, *, enforce_lineage: bool) -> InFlightTask:
    state = item.state
    if state.phase != "awaiting_model":
        raise TailRejected(
            f"{_where(item, event)} arrives at {state.phase}: the runner cannot resume from "
            "a second answer",
            event.seq,
        )
    message = _message(event, "assistant", enforce_lineage=enforce_lineage)
    calls = [block for block in message.content if isinstance(block, ToolUseBlock)]
    state = replace(
        state,
        turns=state.turns + 1,
        token_usage=state.token_usage + usage_from_json(event.data.get("usage")),
    )
    if calls:
        state = replace(
            state,
            phase="executing_tools",
            pending=tuple(PendingCall(call=call) for call in calls),
            pending_tool_result_text=None,
        )
    return _appended(item, state, message, event.seq)


def _tool_call(item: InFlightTask, event: JournalEvent) -> InFlightTask:
    call = block_from_json(event.data["call"])
    if not isinstance(call, ToolUseBlock):
        raise ValueError("call is not a tool_use block")
    requested = item.state.phase == "executing_tools" and any(
        p.call.id == call.id and p.call.name == call.name for p in item.state.pending
    )
    if not requested:
        raise TailRejected(
            f"{_where(item, event)} for call {call.id!r}: no assistant turn requesting it",
            event.seq,
        )
    return item


def _tool_result(item: InFlightTask, event: JournalEvent) -> InFlightTask:
    call_id = event.data["toolCallId"]
    block = block_from_json(event.data["result"])
    if not isinstance(block, ToolResultBlock) or block.tool_use_id != call_id:
        raise ValueError(f"result is not a tool_result block for {call_id!r}")
    state = item.state
    pending = [p for p in state.pending if p.call.id == call_id and p.commit is None]
    if state.phase != "executing_tools" or not pending:
        raise TailRejected(
            f"{_where(item, event)}: call {call_id!r} is not pending (uncommitted) in the entry",
            event.seq,
        )
    commit = ToolCommit(
        block=block,
        record=_record(event.data.get("record"), pending[0].call, block),
        delegation_usage=(
            usage_from_json(event.data["delegationUsage"])
            if event.data.get("delegationUsage") is not None
            else None
        ),
    )
    calls = tuple(replace(p, commit=commit) if p is pending[0] else p for p in state.pending)
    return replace(item, state=replace(state, pending=calls))


def _record(raw: Any, call: ToolUseBlock, block: ToolResultBlock) -> ToolCallRecord:
    if raw is None:  # ``record`` is optional on OMA's event: rebuild it from the call
        return ToolCallRecord(
            tool_name=call.name,
            input=dict(call.input),
            output=text_of(block.content),
            duration_ms=0,
            tool_call_id=call.id,
            is_error=block.is_error,
        )
    if not isinstance(raw, dict):
        raise TypeError(f"record is not an object: {raw!r}")
    return record_from_json(raw, tool_call_id=call.id, is_error=block.is_error)


def _user(item: InFlightTask, event: JournalEvent, *, enforce_lineage: bool) -> InFlightTask:
    message = _message(event, "user", enforce_lineage=enforce_lineage)
    answers = [b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock)]
    state = item.state
    if event.data.get("origin") != "tool_results" and not answers:
        if state.phase == "executing_tools":
            raise TailRejected(
                f"{_where(item, event)} arrives while a tool round is open: the runner "
                "cannot resume from that state",
                event.seq,
            )
        state = replace(state, phase="awaiting_model", final_output="")
        return _appended(item, state, message, event.seq)
    if state.phase != "executing_tools":
        raise TailRejected(f"{_where(item, event)}: no tool round open", event.seq)
    commits = [p.commit for p in state.pending]
    if answers != [p.call.id for p in state.pending] or None in commits:
        raise TailRejected(
            f"{_where(item, event)} answers {answers} but the open round has "
            f"{[p.call.id for p in state.pending]} with commits for "
            f"{[p.call.id for p in state.pending if p.commit]}: the runner cannot resume "
            "from that state",
            event.seq,
        )
    done = [commit for commit in commits if commit is not None]
    delegated = [c.delegation_usage for c in done if c.delegation_usage is not None]
    state = replace(
        state,
        phase="awaiting_model",
        tool_calls=(*state.tool_calls, *(c.record for c in done)),
        pending=(),
        pending_tool_result_text=None,
        token_usage=sum(delegated, state.token_usage),
    )
    return _appended(item, state, message, event.seq)

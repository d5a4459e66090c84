"""Pure transitions of the runner's turn loop. No I/O here.

Each function takes a ``RunnerState`` and returns the next one; the loop saves the result at the
durable boundaries (spec RN-04: a tool turn is saved before any tool runs, each result as it
commits, then the results turn). Every model response counts one turn and adds its token usage,
continuing from restored values so limits do not restart on resume (spec RN-05).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.domain.inflight import PendingCall, RunnerState
from oma_actors.domain.messages import ContentBlock, LLMResponse, Message, TextBlock

if TYPE_CHECKING:
    from oma_actors.domain.approvals import ApprovalRequest
    from oma_actors.tools.executor import ToolOutcome


def initial_state(prompt: str) -> RunnerState:
    """A fresh conversation holding only the user prompt."""
    return RunnerState(phase="awaiting_model", conversation=(Message("user", [TextBlock(prompt)]),))


def after_response(state: RunnerState, response: LLMResponse) -> RunnerState:
    """Record a model response: a tool turn moves to ``executing_tools``, anything else completes.

    ``turns`` and ``token_usage`` advance with every response (RN-05).
    """
    assistant = Message("assistant", list(response.content))
    advanced = replace(
        state,
        conversation=(*state.conversation, assistant),
        messages=(*state.messages, assistant),
        turns=state.turns + 1,
        token_usage=state.token_usage + response.usage,
    )
    calls = response.tool_uses
    if calls:
        return replace(
            advanced,
            phase="executing_tools",
            pending=tuple(PendingCall(call=call) for call in calls),
        )
    return replace(advanced, phase="completed", final_output=response.text, success=True)


def with_commit(state: RunnerState, outcome: ToolOutcome) -> RunnerState:
    """Record the result of one pending call (matched by tool call id)."""
    call_id = outcome.block.tool_use_id
    if not any(item.call.id == call_id and item.commit is None for item in state.pending):
        raise ValueError(f"no uncommitted pending call with id {call_id!r}")
    pending = tuple(
        replace(item, commit=outcome) if item.call.id == call_id else item for item in state.pending
    )
    return replace(state, pending=pending)


def after_tool_results(state: RunnerState) -> RunnerState:
    """All calls committed: one user message with the results in call order, back to the model."""
    outcomes = [item.commit for item in state.pending]
    if any(outcome is None for outcome in outcomes):
        raise ValueError("tool results requested while calls are still uncommitted")
    committed = [outcome for outcome in outcomes if outcome is not None]
    blocks: list[ContentBlock] = [outcome.block for outcome in committed]
    results = Message("user", blocks)
    return replace(
        state,
        phase="awaiting_model",
        conversation=(*state.conversation, results),
        messages=(*state.messages, results),
        tool_calls=(*state.tool_calls, *(outcome.record for outcome in committed)),
        pending=(),
    )


def stopped_at_max_turns(state: RunnerState, max_turns: int) -> RunnerState:
    """End a run that reached ``max_turns`` without a final answer."""
    last_text = next(
        (
            "".join(block.text for block in message.content if isinstance(block, TextBlock))
            for message in reversed(state.messages)
            if message.role == "assistant"
        ),
        "",
    )
    output = last_text or f"Stopped: max_turns ({max_turns}) reached before a final answer."
    return replace(state, phase="completed", final_output=output, success=False, retryable=True)


def failed(state: RunnerState, error: str, *, retryable: bool) -> RunnerState:
    """End a run whose model call failed; turns and usage so far are kept."""
    return replace(state, phase="completed", final_output=error, success=False, retryable=retryable)


def with_user_message(state: RunnerState, text: str) -> RunnerState:
    """Continue a conversation with another user message (e.g. a repair request)."""
    message = Message("user", [TextBlock(text)])
    return replace(
        state,
        phase="awaiting_model",
        conversation=(*state.conversation, message),
        messages=(*state.messages, message),
        final_output="",
    )


def mark_dispatched(state: RunnerState, call_id: str) -> RunnerState:
    """Record that an unsafe call is about to run (its dispatch record, decision D1).

    Once saved, the mark means the call may have had its effect: after a restore it is
    reconciled, never run again. An unknown ``call_id`` changes nothing.
    """
    pending = tuple(
        replace(item, dispatched=True) if item.call.id == call_id else item
        for item in state.pending
    )
    return replace(state, pending=pending)


def attach_request(state: RunnerState, call_id: str, request: ApprovalRequest) -> RunnerState:
    """Park a call on a durable approval request: it does not run until a reviewer decides.

    The request's boundary is ``<task_id>:<tool_call_id>`` (spec AP-25).
    """
    pending = tuple(
        replace(item, approval_request=request) if item.call.id == call_id else item
        for item in state.pending
    )
    return replace(state, pending=pending)

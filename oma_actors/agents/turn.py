"""Pure transitions of the runner's turn loop. No I/O here.

Each function takes a ``RunnerState`` and returns the next one; the loop saves the result at the
durable boundaries (spec RN-04: a tool turn is saved before any tool runs, each result as it
commits, then the results turn). Every model response counts one turn and adds its token usage,
continuing from restored values so limits do not restart on resume (spec RN-05).

The token budget is OMA's ``maxTokenBudget``: once a response (or a delegated sub-agent's usage
replayed with the tool results) takes the total above it, ``budget_exceeded`` is set and the
runner completes unsuccessfully, after the tool calls of that turn if it had any, so no
``tool_use`` is ever left without its result. The flag is state, so a restored runner keeps it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.domain.inflight import PendingCall, RunnerState
from oma_actors.domain.messages import ContentBlock, LLMResponse, Message, TextBlock, TokenUsage

if TYPE_CHECKING:
    from oma_actors.domain.approvals import ApprovalRequest
    from oma_actors.tools.executor import ToolOutcome


def initial_state(prompt: str) -> RunnerState:
    """A fresh conversation holding only the user prompt."""
    return RunnerState(phase="awaiting_model", conversation=(Message("user", [TextBlock(prompt)]),))


def over_budget(usage: TokenUsage, max_token_budget: int | None) -> bool:
    """Whether input plus output tokens exceed the budget (OMA trips strictly above it)."""
    if max_token_budget is None:
        return False
    return usage.input_tokens + usage.output_tokens > max_token_budget


def after_response(
    state: RunnerState, response: LLMResponse, *, max_token_budget: int | None = None
) -> RunnerState:
    """Record a model response: a tool turn moves to ``executing_tools``, anything else completes.

    ``turns`` and ``token_usage`` advance with every response (RN-05). A response that takes
    the usage over ``max_token_budget`` sets ``budget_exceeded``: an answer then completes the
    run unsuccessfully, while a tool turn still runs its calls (``after_tool_results`` stops).
    """
    assistant = Message("assistant", list(response.content))
    usage = state.token_usage + response.usage
    exceeded = state.budget_exceeded or over_budget(usage, max_token_budget)
    advanced = replace(
        state,
        conversation=(*state.conversation, assistant),
        messages=(*state.messages, assistant),
        turns=state.turns + 1,
        token_usage=usage,
        budget_exceeded=exceeded,
    )
    calls = response.tool_uses
    if calls:
        return replace(
            advanced,
            phase="executing_tools",
            pending=tuple(PendingCall(call=call) for call in calls),
        )
    if exceeded:
        return replace(
            advanced, phase="completed", final_output=response.text, success=False, retryable=False
        )
    return replace(advanced, phase="completed", final_output=response.text, success=True)


def with_context(
    state: RunnerState, conversation: tuple[Message, ...], usage: TokenUsage
) -> RunnerState:
    """The conversation a context strategy rewrote; what the rewrite spent counts as usage.

    Only ``conversation`` (what the model is sent) changes: ``messages``, the task's transcript,
    keeps every message. The spend can exceed the budget only together with the next answer's
    (OMA checks the budget after a response), so no flag is set here.
    """
    return replace(state, conversation=conversation, token_usage=state.token_usage + usage)


def with_commit(state: RunnerState, outcome: ToolOutcome) -> RunnerState:
    """Record the result of one pending call (matched by tool call id)."""
    call_id = outcome.block.tool_use_id
    if not any(item.call.id == call_id and item.commit is None for item in state.pending):
        raise ValueError(f"no uncommitted pending call with id {call_id!r}")
    pending = tuple(
        replace(item, commit=outcome) if item.call.id == call_id else item for item in state.pending
    )
    return replace(state, pending=pending)


def after_tool_results(state: RunnerState, *, max_token_budget: int | None = None) -> RunnerState:
    """All calls committed: one user message with the results in call order, back to the model.

    As OMA does (RN-04 #3): ``pending_tool_result_text`` (a loop warning) follows the result
    blocks; each commit's ``delegation_usage`` is added to the task's usage, and when it takes
    the usage over ``max_token_budget`` the budget is exceeded. An exceeded budget (from this
    or the tool turn's response) completes the run unsuccessfully instead of asking the model.
    """
    outcomes = [item.commit for item in state.pending]
    if any(outcome is None for outcome in outcomes):
        raise ValueError("tool results requested while calls are still uncommitted")
    committed = [outcome for outcome in outcomes if outcome is not None]
    blocks: list[ContentBlock] = [outcome.block for outcome in committed]
    if state.pending_tool_result_text is not None:
        blocks.append(TextBlock(state.pending_tool_result_text))
    results = Message("user", blocks)
    delegated = [o.delegation_usage for o in committed if o.delegation_usage is not None]
    usage = sum(delegated, state.token_usage)
    exceeded = state.budget_exceeded or (bool(delegated) and over_budget(usage, max_token_budget))
    advanced = replace(
        state,
        phase="awaiting_model",
        conversation=(*state.conversation, results),
        messages=(*state.messages, results),
        tool_calls=(*state.tool_calls, *(outcome.record for outcome in committed)),
        pending=(),
        pending_tool_result_text=None,
        token_usage=usage,
        budget_exceeded=exceeded,
    )
    if not exceeded:
        return advanced
    return replace(
        advanced,
        phase="completed",
        final_output=last_assistant_text(advanced),
        success=False,
        retryable=False,
    )


def last_assistant_text(state: RunnerState) -> str:
    """The text of the last assistant message (empty when it had none, or there is none)."""
    return next(
        (
            "".join(block.text for block in message.content if isinstance(block, TextBlock))
            for message in reversed(state.messages)
            if message.role == "assistant"
        ),
        "",
    )


def stopped_at_max_turns(state: RunnerState) -> RunnerState:
    """End a run that reached its turn limit: it completes normally, as OMA's runner does.

    OMA's loop just breaks at ``turns >= maxTurns`` and its output is the text of the last
    assistant message, empty when that message had none (``runner.ts``); ``Agent`` then
    reports ``success`` with status ``ok``, so the task completes with that output and is
    never retried. No event or flag marks the stop, hence none here.
    """
    return replace(state, phase="completed", final_output=last_assistant_text(state), success=True)


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

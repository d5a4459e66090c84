"""Pure transitions of the runner's turn loop. No I/O here.

Each function takes a ``RunnerState`` and returns the next one; the loop saves the result at the
durable boundaries (spec RN-04: a tool turn is saved before any tool runs, each result as it
commits, then the results turn). Every model response counts one turn and adds its token usage,
continuing from restored values so limits do not restart on resume (spec RN-05).

One fold (decision D14): a transition a journal event carries is the fold's own rule
(``journal.transitions``: an answer, a commit, the results, a user message, a context rewrite,
a final answer), so a restore folding the run's journal rebuilds what the run held by the same
code. What is the runner's alone stays here, and each is a fact no event carries, so its
boundary compacts (``checkpoint.journal_path``): the token budget, a stop at ``max_turns``, a
failed model call, a dispatch mark, an approval request.

The token budget is OMA's ``maxTokenBudget``: once a response (or a delegated sub-agent's usage
replayed with the tool results) takes the total above it, ``budget_exceeded`` is set and the
runner completes unsuccessfully, after the tool calls of that turn if it had any, so no
``tool_use`` is ever left without its result. The flag is state, so a restored runner keeps it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.domain.inflight import RunnerState
from oma_actors.domain.messages import LLMResponse, Message, TextBlock, TokenUsage
from oma_actors.journal.transitions import (
    StateDraft,
    answered,
    committed,
    finished,
    prompted,
    results_message,
    returned,
    rewritten,
)

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

    The answer changes the state by the fold's rule (``transitions.answered``: ``turns`` and
    ``token_usage`` advance with every response, RN-05), and an answer without calls closes the
    turn by its rule (``finished``). A response that takes the usage over ``max_token_budget``
    sets ``budget_exceeded`` (the runner's own, no event carries it): an answer then completes
    the run unsuccessfully, while a tool turn still runs its calls (``after_tool_results``
    stops).
    """
    draft = StateDraft.of(state)
    answered(draft, Message("assistant", list(response.content)), response.usage)
    exceeded = state.budget_exceeded or over_budget(draft.token_usage, max_token_budget)
    if draft.phase == "executing_tools":  # a tool turn runs its calls, over the budget too
        advanced = draft.state_of(state)
        return (
            replace(advanced, budget_exceeded=True)
            if exceeded and not state.budget_exceeded
            else advanced
        )
    if not exceeded:
        finished(draft)
        return draft.state_of(state)
    return replace(
        draft.state_of(state),
        phase="completed",
        final_output=response.text,
        success=False,
        retryable=False,
        budget_exceeded=True,
    )


def with_context(
    state: RunnerState, conversation: tuple[Message, ...], usage: TokenUsage
) -> RunnerState:
    """The conversation a context strategy rewrote; what the rewrite spent counts as usage.

    The fold's rule (``transitions.rewritten``): only ``conversation`` (what the model is sent)
    changes, ``messages``, the task's transcript, keeps every message. The spend can exceed the
    budget only together with the next answer's (OMA checks the budget after a response), so
    no flag is set here.
    """
    draft = StateDraft.of(state)
    rewritten(draft, conversation, usage)
    return draft.state_of(state)


def with_commit(state: RunnerState, outcome: ToolOutcome) -> RunnerState:
    """Record the result of one pending call (matched by tool call id), by the fold's rule.

    Raises:
        Refused: (a ``ValueError``) no uncommitted pending call has that id.
    """
    draft = StateDraft.of(state)
    committed(draft, outcome)
    return draft.state_of(state)


def after_tool_results(state: RunnerState, *, max_token_budget: int | None = None) -> RunnerState:
    """All calls committed: one user message with the results in call order, back to the model.

    As OMA does (RN-04 #3): the message is ``transitions.results_message`` (the results, then
    ``pending_tool_result_text``, a loop warning) and the fold's rule (``returned``) adds each
    commit's ``delegation_usage`` to the task's usage. When that takes the usage over
    ``max_token_budget`` the budget is exceeded; an exceeded budget (from this or the tool
    turn's response) completes the run unsuccessfully instead of asking the model.

    Raises:
        Refused: (a ``ValueError``) a call of the round is still uncommitted.
    """
    draft = StateDraft.of(state)
    returned(draft, results_message(draft))
    advanced = draft.state_of(state)
    delegated = any(
        item.commit is not None and item.commit.delegation_usage is not None
        for item in state.pending
    )
    exceeded = state.budget_exceeded or (
        delegated and over_budget(advanced.token_usage, max_token_budget)
    )
    if not exceeded:
        return advanced
    return replace(
        advanced,
        phase="completed",
        final_output=last_assistant_text(advanced),
        success=False,
        retryable=False,
        budget_exceeded=True,
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
    """Continue a conversation with another user message (e.g. a repair request), by the
    fold's rule (``transitions.prompted``)."""
    draft = StateDraft.of(state)
    prompted(draft, Message("user", [TextBlock(text)]))
    return draft.state_of(state)


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

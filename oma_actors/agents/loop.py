"""The turn loop of one agent on one conversation: model call, tool calls, results, repeat.

The loop moves through the explicit phases of ``RunnerState`` and reports every durable boundary
of spec RN-04 to ``on_boundary`` *before* anything that depends on it happens: the assistant tool
turn before any tool runs, each tool result before its event is published, the tool-results
message before the next model call, and the terminal turn. Each report carries the facts that
made its state (``agents.facts``: the answer, a dispatch, a commit, the results, a turn's end),
so the run's journal records what happened instead of reconstructing it from states (D14).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, assert_never

from oma_actors.agents.call_ids import distinct_call_ids, transcript_call_ids
from oma_actors.agents.context import ContextRewrite, ContextStrategyError
from oma_actors.agents.facts import (
    Answered,
    BudgetExceeded,
    CallCommitted,
    CallDispatched,
    Fact,
    Facts,
    Prompted,
    ResultsReturned,
    TurnLimitReached,
    turn_end,
)
from oma_actors.agents.tool_calls import (
    Answer,
    CallPolicy,
    Execute,
    Park,
    error_outcome,
    plan_call,
)
from oma_actors.agents.turn import (
    after_response,
    after_tool_results,
    attach_request,
    failed,
    mark_dispatched,
    stopped_at_max_turns,
    with_commit,
    with_context,
)
from oma_actors.domain.inflight import BoundaryKind, PendingCall, RunnerState
from oma_actors.domain.messages import ChatOptions, TokenUsage
from oma_actors.errors import DurableApprovalError, LLMError
from oma_actors.journal.errors import JournalLineageError
from oma_actors.tools.base import Tool, ToolContext
from oma_actors.tools.executor import ToolOutcome, execute_tool_call

if TYPE_CHECKING:
    from oma_actors.agents.context_step import ContextStep
    from oma_actors.llm.base import LLMAdapter

BoundaryHook = Callable[[RunnerState, BoundaryKind, Facts], Awaitable[bool]]
"""Reports a boundary, with the facts that made its state, and answers whether the state is
now durable."""
ToolHook = Callable[[PendingCall, bool], None]
UnknownHook = Callable[[str], None]
# (state after the answer, the answer's usage, the model call's duration in ms)
TurnHook = Callable[[RunnerState, TokenUsage, float], None]
RequestHook = Callable[[RunnerState, ChatOptions, ContextRewrite | None, Facts], None]
"""Sees each model request (the state whose conversation is sent) just before the call, with
the context strategy's rewrite that produced that conversation, if one did (``context/replace``),
and the caller's prompt when this request is the first to send it (``Prompted``).

It may refuse the request by raising ``JournalLineageError`` (JR-09): the call is not made and
the task fails for good, since the same conversation would be refused on every attempt.
"""

DISPATCH_NOT_DURABLE = "TOOL_DISPATCH_NOT_DURABLE"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopContext:
    """Everything the loop needs besides its state."""

    agent_name: str
    adapter: LLMAdapter
    options: ChatOptions
    tools: Mapping[str, Tool]
    max_turns: int
    max_token_budget: int | None = None
    run_id: str | None = None
    task_id: str | None = None
    attempt: int = 1
    on_boundary: BoundaryHook | None = None
    on_tool: ToolHook | None = None
    on_unknown: UnknownHook | None = None
    on_turn: TurnHook | None = None
    on_request: RequestHook | None = None
    context: ContextStep | None = None
    policy: CallPolicy = field(default_factory=CallPolicy)


def prompted(state: RunnerState) -> Facts:
    """The fact of a conversation the caller just opened or continued: its last user message."""
    return (Prompted(message=state.conversation[-1]),)


async def drive(state: RunnerState, ctx: LoopContext, opening: Facts = ()) -> RunnerState:
    """Advance ``state`` until it is completed.

    ``opening``: what the caller did to the conversation before (``prompted``); the first
    model request reports it, so the journal records the prompt once, with the request.

    A failed model call ends the run unsuccessfully (``success=False``, with ``retryable`` set
    from the error) instead of raising; cancellation propagates. Each response's tool call ids
    are made unique in the task's transcript first (``agents.call_ids``).
    """
    # The transcript (``messages``) keeps what a context strategy dropped from the conversation.
    used = transcript_call_ids((*state.conversation, *state.messages))
    while True:
        if state.phase == "completed":
            return state
        if state.phase == "executing_tools":
            state = await _run_pending(state, ctx)
            if state.awaiting_approval:
                return state  # suspended: the task waits for a reviewer (spec AP-27)
            continue
        if state.turns >= ctx.max_turns:
            state = stopped_at_max_turns(state)
            await _boundary(ctx, state, "terminal", (TurnLimitReached(max_turns=ctx.max_turns),))
            return state
        rewrite: ContextRewrite | None = None
        if ctx.context is not None:
            try:
                rewrite = await ctx.context.rewrite(state.conversation)
            except ContextStrategyError as exc:
                return failed(state, str(exc), retryable=False)
            except LLMError as exc:
                return failed(state, f"context strategy: {exc}", retryable=exc.retryable)
            if rewrite is not None:
                state = with_context(state, rewrite.after, rewrite.usage)
        if ctx.on_request is not None:
            try:
                ctx.on_request(state, ctx.options, rewrite, opening)
            except JournalLineageError as exc:
                return failed(state, str(exc), retryable=False)
        opening = ()
        started = time.perf_counter()
        try:
            response = await ctx.adapter.chat(list(state.conversation), ctx.options)
        except LLMError as exc:
            return failed(state, str(exc), retryable=exc.retryable)
        except Exception as exc:  # an adapter bug must fail this task, not the whole run
            return failed(state, f"{type(exc).__name__}: {exc}", retryable=True)
        response = distinct_call_ids(response, used)
        spent = state.budget_exceeded
        state = after_response(state, response, max_token_budget=ctx.max_token_budget)
        answer: tuple[Fact, ...] = (
            Answered(
                message=state.conversation[-1],
                usage=response.usage,
                stop_reason=response.stop_reason,
            ),
        )
        if state.budget_exceeded and not spent:
            answer = (*answer, BudgetExceeded())
        if ctx.on_turn is not None:
            ctx.on_turn(state, response.usage, (time.perf_counter() - started) * 1000)
        kind: BoundaryKind = (
            "assistant_tool_turn" if state.phase == "executing_tools" else "terminal"
        )
        await _boundary(ctx, state, kind, _with_end(answer, state))


def _with_end(facts: tuple[Fact, ...], state: RunnerState) -> Facts:
    """``facts``, then the end of the turn when ``state`` shows it closed."""
    end = turn_end(state)
    return facts if end is None else (*facts, end)


async def _boundary(
    ctx: LoopContext, state: RunnerState, kind: BoundaryKind, facts: Facts = ()
) -> bool:
    if ctx.on_boundary is None:
        return True
    return await ctx.on_boundary(state, kind, facts)


async def _run_pending(state: RunnerState, ctx: LoopContext) -> RunnerState:
    """Run every uncommitted call concurrently; each result commits on its own (RN-04 #2).

    Calls committed before a restore are replayed, never re-run (RN-06). What happens to the
    others is ``plan_call``'s decision: run, answer without running (a gate's denial, an unsafe
    call's unknown outcome, a rejected approval) or park on an approval request (AP-25), while
    sibling calls still run and commit. A parked turn ends the loop with the task suspended.
    """
    if ctx.on_tool is not None:
        for item in state.pending:
            if item.commit is not None:
                ctx.on_tool(item, True)
    current = state
    # Commits from parallel calls are applied one at a time so each boundary sees a consistent
    # state that includes every commit made before it.
    commit_lock = asyncio.Lock()

    async def run_one(item: PendingCall) -> None:
        nonlocal current
        tool_ctx = ToolContext(
            run_id=ctx.run_id,
            task_id=ctx.task_id,
            tool_call_id=item.call.id,
            agent_name=ctx.agent_name,
            task_attempt=ctx.attempt,
            run_attempt=ctx.policy.run_attempt,
            fencing_token=ctx.policy.fencing_token,
        )
        plan = await plan_call(item, ctx.tools, tool_ctx, ctx.policy)
        outcome: ToolOutcome | None = None
        call = item.call
        match plan:
            case Park(request=request):
                if item.approval_request is None:
                    async with commit_lock:
                        current = attach_request(current, item.call.id, request)
                        parked = _with_end((), current)
                        if not await _boundary(ctx, current, "approval_requested", parked):
                            # Spec AP-19/AP-25: never report a suspension that is not durable.
                            raise DurableApprovalError(
                                "APPROVAL_INTEGRITY_ERROR",
                                f"approval for tool call {item.call.id!r} could not be "
                                "checkpointed; the suspension was not reported",
                            )
                return
            case Answer(outcome=answer, unknown=unknown):
                outcome = answer
                if unknown and ctx.on_unknown is not None:
                    ctx.on_unknown(item.call.id)
            case Execute(input=edited):
                if edited is not None:
                    # An approval with edits: the call runs once, on the reviewer's input.
                    call = replace(call, input=edited)
                tool = ctx.tools.get(item.call.name)
                if tool is not None and tool.effect == "unsafe":
                    # The dispatch record must be durable before the effect can happen.
                    async with commit_lock:
                        current = mark_dispatched(current, item.call.id)
                        durable = await _boundary(
                            ctx, current, "tool_dispatch", (CallDispatched(call=item.call),)
                        )
                    if not durable:
                        outcome = error_outcome(
                            item,
                            f"{DISPATCH_NOT_DURABLE}: the call could not be recorded durably "
                            "before running, so it was not run.",
                        )
            case _:
                assert_never(plan)
        if outcome is None:
            outcome = await execute_tool_call(call, ctx.tools, tool_ctx)
        async with commit_lock:
            current = with_commit(current, outcome)
            committed = CallCommitted(
                call=item.call,
                commit=outcome,
                consumes_approval=item.approval_request is not None,
            )
            await _boundary(ctx, current, "tool_commit", _with_end((committed,), current))
        if ctx.on_tool is not None:
            ctx.on_tool(PendingCall(call=item.call, commit=outcome), False)

    try:
        async with asyncio.TaskGroup() as group:
            for item in state.uncommitted:
                group.create_task(run_one(item))
    except ExceptionGroup as group_error:
        # An approval integrity problem is the run's error, not one task's; surface it alone.
        approval = group_error.subgroup(DurableApprovalError)
        if approval is not None:
            raise approval.exceptions[0] from group_error
        raise
    if current.awaiting_approval:
        await _boundary(ctx, current, "suspended", _with_end((), current))
        return current
    spent = current.budget_exceeded
    current = after_tool_results(current, max_token_budget=ctx.max_token_budget)
    returned: tuple[Fact, ...] = (ResultsReturned(message=current.conversation[-1]),)
    if current.budget_exceeded and not spent:
        returned = (*returned, BudgetExceeded())
    await _boundary(ctx, current, "tool_results", _with_end(returned, current))
    return current

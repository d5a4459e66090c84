"""The turn loop of one agent on one conversation: model call, tool calls, results, repeat.

The loop moves through the explicit phases of ``RunnerState`` and reports every durable boundary
of spec RN-04 to ``on_boundary`` *before* anything that depends on it happens: the assistant tool
turn before any tool runs, each tool result before its event is published, the tool-results
message before the next model call, and the terminal turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.agents.state import BoundaryKind, PendingCall, RunnerState
from oma_actors.agents.turn import (
    after_response,
    after_tool_results,
    failed,
    mark_dispatched,
    stopped_at_max_turns,
    with_commit,
)
from oma_actors.errors import LLMError
from oma_actors.tools.base import Tool, ToolContext, ToolResult
from oma_actors.tools.executor import ToolOutcome, execute_tool_call, outcome_of

if TYPE_CHECKING:
    from oma_actors.domain.messages import ChatOptions
    from oma_actors.llm.base import LLMAdapter

BoundaryHook = Callable[[RunnerState, BoundaryKind], Awaitable[bool]]
"""Reports a boundary and answers whether the state is now durable."""
ToolHook = Callable[[PendingCall, bool], None]
UnknownHook = Callable[[str], None]

OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
DISPATCH_NOT_DURABLE = "TOOL_DISPATCH_NOT_DURABLE"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopContext:
    """Everything the loop needs besides its state."""

    agent_name: str
    adapter: LLMAdapter
    options: ChatOptions
    tools: Mapping[str, Tool]
    max_turns: int
    run_id: str | None = None
    task_id: str | None = None
    attempt: int = 1
    on_boundary: BoundaryHook | None = None
    on_tool: ToolHook | None = None
    on_unknown: UnknownHook | None = None


async def drive(state: RunnerState, ctx: LoopContext) -> RunnerState:
    """Advance ``state`` until it is completed.

    A failed model call ends the run unsuccessfully (``success=False``, with ``retryable`` set
    from the error) instead of raising; cancellation propagates.
    """
    while True:
        if state.phase == "completed":
            return state
        if state.phase == "executing_tools":
            state = await _run_pending(state, ctx)
            continue
        if state.turns >= ctx.max_turns:
            state = stopped_at_max_turns(state, ctx.max_turns)
            await _boundary(ctx, state, "terminal")
            return state
        try:
            response = await ctx.adapter.chat(list(state.conversation), ctx.options)
        except LLMError as exc:
            return failed(state, str(exc), retryable=exc.retryable)
        except Exception as exc:  # an adapter bug must fail this task, not the whole run
            return failed(state, f"{type(exc).__name__}: {exc}", retryable=True)
        state = after_response(state, response)
        kind: BoundaryKind = (
            "assistant_tool_turn" if state.phase == "executing_tools" else "terminal"
        )
        await _boundary(ctx, state, kind)


async def _boundary(ctx: LoopContext, state: RunnerState, kind: BoundaryKind) -> bool:
    if ctx.on_boundary is None:
        return True
    return await ctx.on_boundary(state, kind)


async def _run_pending(state: RunnerState, ctx: LoopContext) -> RunnerState:
    """Run every uncommitted call concurrently; each result commits on its own (RN-04 #2).

    Calls committed before a restore are replayed, never re-run (RN-06). An ``unsafe`` call
    that was dispatched but never committed is not re-run either: its tool's ``reconcile``
    decides, or the model is told the outcome is unknown (decision D1).
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
            attempt=ctx.attempt,
        )
        tool = ctx.tools.get(item.call.name)
        outcome: ToolOutcome | None = None
        if item.dispatched:
            outcome = await _reconcile(ctx, item, tool_ctx)
        elif tool is not None and tool.effect == "unsafe":
            # The dispatch record must be durable before the effect can happen (strict).
            async with commit_lock:
                current = mark_dispatched(current, item.call.id)
                durable = await _boundary(ctx, current, "tool_dispatch")
            if not durable:
                outcome = _error_outcome(
                    item,
                    f"{DISPATCH_NOT_DURABLE}: the call could not be recorded durably before "
                    "running, so it was not run.",
                )
        if outcome is None:
            outcome = await execute_tool_call(item.call, ctx.tools, tool_ctx)
        async with commit_lock:
            current = with_commit(current, outcome)
            await _boundary(ctx, current, "tool_commit")
        if ctx.on_tool is not None:
            ctx.on_tool(PendingCall(call=item.call, commit=outcome), False)

    async with asyncio.TaskGroup() as group:
        for item in state.uncommitted:
            group.create_task(run_one(item))
    current = after_tool_results(current)
    await _boundary(ctx, current, "tool_results")
    return current


async def _reconcile(ctx: LoopContext, item: PendingCall, tool_ctx: ToolContext) -> ToolOutcome:
    """Decide a dispatched, uncommitted unsafe call after a restore, without re-running it."""
    tool = ctx.tools.get(item.call.name)
    if tool is not None and tool.reconcile is not None:
        decided = await tool.reconcile(tool_ctx)
        if decided is not None:
            return outcome_of(item.call, decided, 0)
    if ctx.on_unknown is not None:
        ctx.on_unknown(item.call.id)
    return _error_outcome(
        item,
        f"{OUTCOME_UNKNOWN}: tool {item.call.name!r} was started before an interruption and "
        "its outcome is unknown; it was not run again. Check its effect before retrying.",
    )


def _error_outcome(item: PendingCall, message: str) -> ToolOutcome:
    return outcome_of(item.call, ToolResult(message, is_error=True), 0)

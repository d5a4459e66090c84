"""Delegated tokens of a restored commit count against the agent's budget (``_run_pending``).

The guard: ``after_tool_results(current, max_token_budget=ctx.max_token_budget)`` in
``agents.loop._run_pending``. OMA adds each commit's ``delegationUsage`` (tokens a delegating
tool spent) to the task's usage when the results message is written, and a total over
``maxTokenBudget`` ends the task there instead of asking the model again. A checkpoint restored
with such a commit (an OMA one) must be held to the budget too: without the budget passed, the
restored task would make one more model call, over its budget.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Allow, Reviewer, Suspend, decide_approval
from oma_actors.checkpoint import checkpoint_key
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.approvals.gates import ToolCallRequest

RUN = "run-delegated-budget"


class Charge(BaseModel):
    amount: int


async def _charge(args: Charge, ctx: ToolContext) -> str:
    return f"charged {args.amount}"


CHARGE = define_tool(name="charge_card", description="charge", input_model=Charge, execute=_charge)


def _script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) > 1:
        return LLMResponse([TextBlock("after")], usage=TokenUsage(1, 1))
    return LLMResponse(
        [
            ToolUseBlock("c-small", "charge_card", {"amount": 1}),
            ToolUseBlock("c-big", "charge_card", {"amount": 900}),
        ],
        stop_reason="tool_use",
        usage=TokenUsage(1, 1),
    )


def _gate(call: ToolCallRequest) -> Allow | Suspend:
    return Suspend("review") if call.input["amount"] > 100 else Allow()


async def test_a_restored_commits_delegated_tokens_end_the_task_over_its_budget() -> None:
    """Guard: ``max_token_budget=ctx.max_token_budget`` given to ``after_tool_results``."""
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id=RUN)
    adapter = ScriptedAdapter(_script)
    config = AgentConfig("worker", adapter=adapter, tools=[CHARGE], max_token_budget=100)
    team = Team("t", [config])
    first = await OpenMultiAgent(on_tool_call=_gate).run_tasks(
        team, [Task("pay", "pay both")], checkpoint=options
    )
    assert first.status.code == "suspended"
    # The committed sibling spent 500 delegated tokens, as an OMA checkpoint records them.
    stored = await store.get(checkpoint_key(RUN))
    assert stored is not None
    raw = json.loads(stored.value)
    [small, big] = raw["inFlightTasks"][0]["pendingToolCalls"]
    assert "commit" in small
    assert "commit" not in big
    small["commit"]["delegationUsage"] = {"input_tokens": 400, "output_tokens": 100}
    await store.set(checkpoint_key(RUN), json.dumps(raw))
    [request] = first.pending_approvals
    await decide_approval(
        store,
        request_id=request.id,
        request_hash=request.request_hash,
        decision="approve",
        reviewer=Reviewer("ada"),
    )
    calls_before = adapter.call_count

    done = await OpenMultiAgent().restore(team, checkpoint=options)

    result = done.task_results[first.tasks[0].id]
    assert result.token_usage.input_tokens + result.token_usage.output_tokens > 100
    assert result.success is False  # ended over its budget, with the results message
    assert adapter.call_count == calls_before  # and never asked the model again

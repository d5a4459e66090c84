"""Each parked request of a turn is published once (``RunActor._boundary``, AP-19, AP-34).

Two guards in ``RunActor._boundary``:

- ``if item.commit is not None and item.approval_request is not None``: a request leaves the
  run's pending approvals only once the call it gates has committed. Without the commit check, a
  sibling's commit boundary forgets a request that is still parked;
- ``item.approval_request.id not in self._pending``: an ``approval_requested`` boundary publishes
  only the requests the run does not hold yet.

Lose either, and the next parked call of the same turn publishes the earlier request again: a
second ledger write and a second ``ApprovalPending`` for a request reviewers already know.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from charge_card import Charge, charge_card

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
)
from oma_actors.approvals import Allow, Suspend
from oma_actors.events import ApprovalPending, ProgressEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.approvals.gates import ToolCallRequest


def _script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) > 1:
        return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))
    return LLMResponse(
        [
            ToolUseBlock("c-first", "charge_card", {"amount": 500}),
            ToolUseBlock("c-small", "charge_card", {"amount": 1}),
            ToolUseBlock("c-late", "charge_card", {"amount": 700}),
        ],
        stop_reason="tool_use",
        usage=TokenUsage(1, 1),
    )


async def test_a_parked_request_is_published_once_while_siblings_commit() -> None:
    """Guards: ``item.commit is not None`` (consume on commit only) and ``not in self._pending``."""
    executions: list[int] = []

    async def charge(args: Charge, ctx: ToolContext) -> str:
        executions.append(args.amount)
        return f"charged {args.amount}"

    async def gate(call: ToolCallRequest) -> Allow | Suspend:
        amount = call.input["amount"]
        if amount == 700:
            await asyncio.sleep(0.05)  # parks after the sibling's commit boundary
        return Suspend("review") if amount > 100 else Allow()

    tool = charge_card(charge)
    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter(_script), tools=[tool])])
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_tool_call=gate, on_progress=events.append).run_tasks(
        team,
        [Task("pay", "pay the invoices")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="run-consumed"),
    )

    assert result.status.code == "suspended"
    assert executions == [1]
    published = [e.request.boundary for e in events if isinstance(e, ApprovalPending)]
    assert sorted(published) == sorted(r.boundary for r in result.pending_approvals)
    assert len(published) == len(set(published)) == 2  # each request announced exactly once

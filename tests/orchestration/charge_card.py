"""The one-call payment team of the run actor's approval and budget tests: a ``charge_card``
tool, a model that asks for one charge of 7 and then answers ``paid`` (an agent of both:
``paying_agent``), a tool gate that
suspends every call for review, and the approval of the one request a run left pending."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from oma_actors import AgentConfig, TokenUsage, ToolContext, define_tool
from oma_actors.approvals import ApprovalRequest, Reviewer, Suspend, decide_approval
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from oma_actors import TeamRunResult, Tool
    from oma_actors.approvals.gates import ToolCallRequest
    from oma_actors.llm import ChatOptions, Message
    from oma_actors.stores import InMemoryStore

    Script = Callable[[Sequence[Message], ChatOptions], LLMResponse]


class Charge(BaseModel):
    """The input of ``charge_card``."""

    amount: int


async def never_runs(args: Charge, ctx: ToolContext) -> str:
    """The charge of a test whose call must not run (suspended, or halted before it)."""
    raise AssertionError("this test's charge never runs")


def charge_card(execute: Callable[[Charge, ToolContext], Awaitable[str]] = never_runs) -> Tool:
    """The ``charge_card`` tool, running ``execute``."""
    return define_tool(
        name="charge_card", description="charge", input_model=Charge, execute=execute
    )


def payer(usage: TokenUsage | None = None) -> Script:
    """A model that asks for one charge of 7 (its response costing ``usage``), then answers."""

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if len(messages) > 1:
            return LLMResponse([TextBlock("paid")], usage=TokenUsage(1, 1))
        call = ToolUseBlock("call-1", "charge_card", {"amount": 7})
        return LLMResponse([call], stop_reason="tool_use", usage=usage or TokenUsage(1, 1))

    return script


def paying_agent(
    name: str = "payer",
    *,
    usage: TokenUsage | None = None,
    execute: Callable[[Charge, ToolContext], Awaitable[str]] = never_runs,
    model: str = "",
) -> AgentConfig:
    """An agent on ``payer(usage)``'s model with ``charge_card(execute)``."""
    return AgentConfig(
        name, model=model, adapter=ScriptedAdapter(payer(usage)), tools=[charge_card(execute)]
    )


def suspend(call: ToolCallRequest) -> Suspend:
    """A tool gate that suspends every call for a durable review."""
    return Suspend("Finance review")


async def approve_pending(store: InMemoryStore, result: TeamRunResult) -> ApprovalRequest:
    """Approve the one request ``result`` left pending; return it."""
    [request] = result.pending_approvals
    await decide_approval(
        store,
        request_id=request.id,
        request_hash=request.request_hash,
        decision="approve",
        reviewer=Reviewer("finance"),
    )
    return request

"""An unsafe tool's ``reconcile`` decides a call interrupted between dispatch and commit (D1).

The run stops inside the tool, after the checkpoint marked the call dispatched and before its
result was committed. The restore must not run the tool again: it asks the tool's
``reconcile(ctx)`` what happened and uses the answer as the call's result; only without an
answer is the model told that the outcome is unknown.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest
from acceptance_helpers import answer, calls
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    ToolContext,
    ToolResult,
    define_tool,
)
from oma_actors.checkpoint import checkpoint_key
from oma_actors.events import ProgressEvent, ToolOutcomeUnknown
from oma_actors.llm import ToolResultBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


class Payment(BaseModel):
    label: str


class PaymentDesk:
    """An unsafe ``pay`` tool whose first run is interrupted, and what its reconcile saw."""

    def __init__(self, verdict: ToolResult | None) -> None:
        self.verdict = verdict
        self.executed: list[str] = []
        self.reconciled: list[ToolContext] = []
        self.run: asyncio.Task[TeamRunResult] | None = None

    async def execute(self, args: Payment, ctx: ToolContext) -> str:
        self.executed.append(f"{args.label}@{ctx.tool_call_id}")
        assert self.run is not None
        self.run.cancel()  # the process "dies" after the effect, before the commit
        await asyncio.sleep(0)
        return f"paid {args.label}"

    async def reconcile(self, ctx: ToolContext) -> ToolResult | None:
        self.reconciled.append(ctx)
        return self.verdict

    def team(self, adapter: ScriptedAdapter, store: InMemoryStore) -> Team:
        tool = define_tool(
            name="pay",
            description="Pay once.",
            input_model=Payment,
            execute=self.execute,
            effect="unsafe",
            reconcile=self.reconcile,
        )
        return Team(
            "t", [AgentConfig("worker", adapter=adapter, tools=[tool])], shared_memory_store=store
        )


async def interrupted(desk: PaymentDesk) -> tuple[Team, ScriptedAdapter, InMemoryStore]:
    """Run until ``pay`` is interrupted; the checkpoint holds the call dispatched, uncommitted."""
    store = InMemoryStore()
    adapter = ScriptedAdapter([calls(("call-pay", "pay", {"label": "X"})), answer("done")])
    team = desk.team(adapter, store)
    desk.run = asyncio.ensure_future(
        OpenMultiAgent().run_tasks(team, [Task("pay", "x", id="t-pay")], checkpoint=True)
    )
    with pytest.raises(asyncio.CancelledError):
        await desk.run
    stored = json.loads((await store.get(checkpoint_key(None))).value)  # type: ignore[union-attr]
    [pending] = stored["inFlightTasks"][0]["pendingToolCalls"]
    assert pending["dispatched"] is True
    assert "commit" not in pending
    assert desk.executed == ["X@call-pay"]
    assert desk.reconciled == []
    return team, adapter, store


async def test_reconcile_decides_an_interrupted_unsafe_call_and_its_result_is_used() -> None:
    desk = PaymentDesk(ToolResult("paid X already: receipt 42"))
    team, adapter, _ = await interrupted(desk)

    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).restore(team)
    assert result.success, result.status
    assert desk.executed == ["X@call-pay"]  # never run again
    [ctx] = desk.reconciled
    assert (ctx.run_id, ctx.task_id, ctx.tool_call_id, ctx.agent_name) == (
        result.run_id, "t-pay", "call-pay", "worker",
    )  # fmt: skip
    # The model is shown the reconciled outcome as the call's result, not an unknown outcome.
    shown = adapter.calls[1].messages[-1].content[0]
    assert isinstance(shown, ToolResultBlock)
    assert (shown.tool_use_id, shown.content, shown.is_error) == (
        "call-pay", "paid X already: receipt 42", False,
    )  # fmt: skip
    assert not [e for e in events if isinstance(e, ToolOutcomeUnknown)]
    [record] = result.task_results["t-pay"].tool_calls
    assert (record.tool_name, record.output) == ("pay", "paid X already: receipt 42")

    # The reconciled result was committed: later restores neither reconcile nor run it again.
    again = await OpenMultiAgent().restore(team)
    assert [task.status for task in again.tasks] == ["completed"]
    assert len(desk.reconciled) == 1
    assert desk.executed == ["X@call-pay"]
    assert adapter.call_count == 2


async def test_a_reconciled_failure_reaches_the_model_as_an_error_result() -> None:
    desk = PaymentDesk(ToolResult("the payment was declined", is_error=True))
    team, adapter, _ = await interrupted(desk)
    result = await OpenMultiAgent().restore(team)
    assert result.success
    assert len(desk.reconciled) == 1
    shown = adapter.calls[1].messages[-1].content[0]
    assert isinstance(shown, ToolResultBlock)
    assert (shown.content, shown.is_error) == ("the payment was declined", True)
    assert desk.executed == ["X@call-pay"]


async def test_reconcile_without_a_verdict_leaves_the_outcome_unknown() -> None:
    desk = PaymentDesk(None)
    team, adapter, _ = await interrupted(desk)
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).restore(team)
    assert result.success
    assert len(desk.reconciled) == 1  # asked, but it could not tell
    shown = adapter.calls[1].messages[-1].content[0]
    assert isinstance(shown, ToolResultBlock)
    assert shown.is_error
    assert "TOOL_OUTCOME_UNKNOWN" in str(shown.content)
    assert [e.tool_call_id for e in events if isinstance(e, ToolOutcomeUnknown)] == ["call-pay"]
    assert desk.executed == ["X@call-pay"]


async def test_a_plain_reconcile_function_s_verdict_is_used() -> None:
    """A sync ``reconcile`` is taken at its word, as a sync ``execute`` is (``tools.base.settle``):
    awaiting its verdict would raise in the restore."""
    desk = PaymentDesk(ToolResult("paid X already"))
    team, adapter, _ = await interrupted(desk)
    [agent] = team.agents
    [tool] = agent.tools
    plain = replace(tool, reconcile=lambda ctx: desk.verdict)
    result = await OpenMultiAgent().restore(replace(team, agents=[replace(agent, tools=[plain])]))
    assert result.success, result.status
    shown = adapter.calls[1].messages[-1].content[0]
    assert isinstance(shown, ToolResultBlock)
    assert (shown.content, shown.is_error) == ("paid X already", False)
    assert desk.executed == ["X@call-pay"]

"""A real run, interrupted inside an unsafe tool and restored: the timeline says "settled".

The journal's facts, not text: the call's ``tool/call`` is attempt 1's (its durable dispatch),
its ``tool/result`` attempt 2's, and attempt 2 wrote no ``tool/call`` of its own for it,
because the restore settled it through ``reconcile`` without running it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    TokenUsage,
    ToolContext,
    ToolResult,
    define_tool,
)
from oma_actors.checkpoint import Checkpoint
from oma_actors.journal import JsonlRunJournal
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter
from oma_actors.timeline import build_timeline


class Payment(BaseModel):
    label: str


@pytest.mark.parametrize(
    ("verdict", "mark"),
    [(ToolResult("paid X already: receipt 42"), "settled"), (None, "outcome unknown")],
)
async def test_an_unsafe_call_settled_by_reconcile_is_not_re_ran(
    tmp_path: Path, verdict: ToolResult | None, mark: str
) -> None:
    executed: list[str] = []
    running: list[asyncio.Task[TeamRunResult]] = []

    async def pay(args: Payment, ctx: ToolContext) -> str:
        executed.append(args.label)
        running[0].cancel()  # the process "dies" after the effect, before the commit
        await asyncio.sleep(0)
        return "paid"

    async def reconcile(ctx: ToolContext) -> ToolResult | None:
        return verdict

    tool = define_tool(name="pay", description="Pay once.", input_model=Payment, execute=pay,
                       effect="unsafe", reconcile=reconcile)  # fmt: skip
    adapter = ScriptedAdapter([
        LLMResponse([ToolUseBlock("call-pay", "pay", {"label": "X"})], stop_reason="tool_use",
                    usage=TokenUsage(1, 1)),
        LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1)),
    ])  # fmt: skip
    team = Team("t", [AgentConfig("worker", adapter=adapter, tools=[tool])])
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="pay-run")
    path = tmp_path / "journal.jsonl"

    journal = JsonlRunJournal(path)
    running.append(asyncio.ensure_future(OpenMultiAgent().run_tasks(
        team, [Task("pay", "x", id="t-pay")], checkpoint=options, journal=journal
    )))  # fmt: skip
    with pytest.raises(asyncio.CancelledError):
        await running[0]
    await journal.close()

    journal = JsonlRunJournal(path)
    result = await OpenMultiAgent().restore(team, checkpoint=options, journal=journal)
    await journal.close()
    assert result.success
    assert executed == ["X"]  # never run again

    events = await JsonlRunJournal(path).read_from(0)
    starts = [e.attempt for e in events if e.type == "tool/call"]
    commits = [e.attempt for e in events if e.type == "tool/result"]
    assert (starts, commits) == ([1], [2])
    snapshot = await Checkpoint(store, run_id="pay-run").load_latest()
    assert snapshot is not None
    [call] = build_timeline(snapshot, events).calls
    assert (call.call_id, call.mark, call.attempt) == ("call-pay", mark, 2)

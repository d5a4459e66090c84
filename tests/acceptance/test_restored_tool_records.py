"""A restored run's results name each tool call the way the live run's did.

OMA's stored record is ``{toolName, input, output, duration}``: no call id, no error flag. A
restore takes both from the conversation the records belong to (``jsonforms.records_from_json``
for OMA's form, the result blocks for the journal-first form), so ``AgentRunResult.tool_calls``
after a restore equals the live run's, an errored call still ``is_error``, two calls of one tool
with one input told apart by their outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    ToolResult,
    define_tool,
)
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter


class Sku(BaseModel):
    sku: str


def team() -> Team:
    asked = 0

    async def price(args: Sku, ctx: ToolContext) -> ToolResult:
        nonlocal asked
        asked += 1
        if asked == 2:  # the same call as the first, failing this time
            return ToolResult("price service down", is_error=True)
        return ToolResult(f"{args.sku}: 11")

    def model(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        n = sum(1 for m in messages if m.role == "assistant")
        if n < 3:
            use = ToolUseBlock(f"toolu_{n}", "price", {"sku": "a-1"})
            return LLMResponse([use], stop_reason="tool_use", usage=TokenUsage(1, 1))
        return LLMResponse([TextBlock("priced")], usage=TokenUsage(1, 1))

    tool = define_tool(name="price", description="d", input_model=Sku, execute=price)
    return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(model), tools=[tool])])


@pytest.mark.parametrize("journal_first", [False, True], ids=["oma-form", "journal-first"])
async def test_restored_results_keep_each_call_s_id_and_error(
    tmp_path: Path, journal_first: bool
) -> None:
    def options() -> CheckpointOptions:
        return CheckpointOptions(store=FileStore(tmp_path / "state.json"), run_id="r")

    async def run(restore: bool) -> list[tuple[str, bool, str]]:
        journal = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0)
        kwargs = {"journal": JournalOptions(journal, durable=True)} if journal_first else {}
        try:
            tasks = [Task("price", "x", assignee="w", id="t0")]
            oma = OpenMultiAgent()
            if restore:
                result = await oma.restore(team(), checkpoint=options(), **kwargs)  # type: ignore[arg-type]
            else:
                result = await oma.run_tasks(team(), tasks, checkpoint=options(), **kwargs)  # type: ignore[arg-type]
        finally:
            await journal.close()
        assert result.success
        records = result.task_results["t0"].tool_calls
        return [(r.tool_call_id, r.is_error, r.output) for r in records]

    live = await run(restore=False)
    assert live == [
        ("toolu_0", False, "a-1: 11"),
        ("toolu_1", True, "price service down"),
        ("toolu_2", False, "a-1: 11"),
    ]
    assert await run(restore=True) == live

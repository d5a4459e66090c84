"""What a context strategy saves and what its journaling costs, side by side (no timings).

One agent calls a tool ``STEPS`` times (each result ``PAYLOAD`` characters), then answers, with
no strategy, ``SlidingWindow(10)`` and ``CompressToolResults(200)``, on a JSONL journal in both
modes. Reported: the characters of every conversation sent to the model, and the journal's
bytes, each as a ratio to the run without a strategy. A strategy's ``context/replace`` events
(with their layout) must keep the journal linear in the run: in journal-first mode the ratio
stays close to 1.

    .venv/bin/python bench/context_strategies.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    CompressToolResults,
    ContextStrategy,
    OpenMultiAgent,
    SlidingWindow,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.domain.jsonforms import message_to_json
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import (
    ChatOptions,
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

STEPS = 200
PAYLOAD = 1000


class Step(BaseModel):
    n: int


def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    done = 0
    for block in messages[-1].content:
        if isinstance(block, ToolResultBlock) and isinstance(block.content, str):
            done = int(block.content.split()[1])
    if done >= STEPS:
        return LLMResponse([TextBlock("finished")], usage=TokenUsage(1, 1))
    call = ToolUseBlock(f"call-{done + 1}", "step", {"n": done + 1})
    return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))


async def measure(strategy: ContextStrategy | None, *, durable: bool) -> tuple[int, int]:
    """(characters sent to the model, journal bytes) of one run."""

    async def step(args: Step, ctx: ToolContext) -> str:
        return f"step {args.n} " + "x" * PAYLOAD

    tool = define_tool(name="step", description="one step", input_model=Step, execute=step)
    adapter = ScriptedAdapter(script)
    agent = AgentConfig(
        "w", adapter=adapter, tools=[tool], max_turns=STEPS + 1, context_strategy=strategy
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.jsonl"
        journal = JsonlRunJournal(path, flush_interval_ms=0)
        result = await OpenMultiAgent().run_tasks(
            Team("t", [agent]), [Task("steps", "do the steps", id="a")],
            checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r"),
            journal=JournalOptions(journal, durable=durable),
        )  # fmt: skip
        assert result.success, result.status
        await journal.close()
        size = (await asyncio.to_thread(path.stat)).st_size
    sent = sum(len(json.dumps([message_to_json(m) for m in c.messages])) for c in adapter.calls)
    return sent, size


async def main() -> None:
    strategies: dict[str, ContextStrategy | None] = {
        "none": None,
        "SlidingWindow(10)": SlidingWindow(10),
        "CompressToolResults(200)": CompressToolResults(200),
    }
    print(f"{STEPS} tool rounds of {PAYLOAD} characters")
    for durable in (True, False):
        mode = "journal-first" if durable else "OMA's mode"
        base_sent, base_size = await measure(None, durable=durable)
        for name, strategy in strategies.items():
            sent, size = await measure(strategy, durable=durable)
            print(
                f"{mode:14s} {name:25s} sent {sent:>11,} chars ({sent / base_sent:5.2f}x)  "
                f"journal {size:>10,} bytes ({size / base_size:5.2f}x)"
            )


if __name__ == "__main__":
    asyncio.run(main())

"""A child for ``test_crash_memory_writes``: a tool writes to the team's shared-memory store.

One task, journal-first: turn 1 calls ``remember``, which writes ``tool/<call id>`` to the team's
store itself (``Team(shared_memory_store=)``) and is committed; turn 2 calls ``boom``, which in
``run`` kills the process (``os._exit``). ``restore`` restores in a fresh process and prints the
store's keys. Every execution of a tool is appended to ``effects.log``.

    python memory_child.py DIR run|restore file|sqlite
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    define_tool,
    open_store,
)
from oma_actors.journal import JournalOptions, open_journal
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.testing import ScriptedAdapter

CRASHED = 3


class Args(BaseModel):
    """The tools' input."""

    text: str


def main() -> None:
    """Run or restore, as the module docstring says."""
    folder, phase, kind = sys.argv[1:4]
    effects = os.path.join(folder, "effects.log")

    def logged(name: str, ctx: Any) -> None:
        with open(effects, "a", encoding="utf-8") as log:
            log.write(f"{name}@{ctx.tool_call_id}\n")

    def script(messages: Any, options: Any) -> LLMResponse:
        turn = sum(1 for message in messages if message.role == "assistant")
        if turn < 2:
            name = ("remember", "boom")[turn]
            call = ToolUseBlock(f"c-{name}", name, {"text": "precious"})
            return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))
        return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))

    async def go() -> None:
        if kind == "file":
            uris = (f"file://{folder}/m.json", f"file://{folder}/s.json", f"{folder}/j.jsonl")
        else:
            uris = (
                f"sqlite:///{folder}/m.db",
                f"sqlite:///{folder}/s.db",
                f"sqlite:///{folder}/s.db",
            )
        async with open_store(uris[0]) as memory, open_store(uris[1]) as store:

            async def remember(args: Args, ctx: Any) -> str:
                logged("remember", ctx)
                await memory.set(f"tool/{ctx.tool_call_id}", args.text)
                return "stored"

            async def boom(args: Args, ctx: Any) -> str:
                logged("boom", ctx)
                if phase == "run":
                    os._exit(CRASHED)  # a crash: no cleanup runs
                return "ok"

            tools = [
                define_tool(name="remember", description="r", input_model=Args, execute=remember),
                define_tool(name="boom", description="b", input_model=Args, execute=boom),
            ]
            agent = AgentConfig("a", adapter=ScriptedAdapter(script), tools=tools)
            team = Team("m", [agent], shared_memory_store=memory)
            journal = open_journal(uris[2])
            checkpoint = CheckpointOptions(store=store, run_id="mem")
            tasks = [Task("t1", "do it", id="t1", assignee="a")]
            oma = OpenMultiAgent()
            try:
                if phase == "run":
                    await oma.run_tasks(
                        team, tasks, checkpoint=checkpoint, journal=JournalOptions(journal)
                    )
                else:
                    result = await oma.restore(
                        team, checkpoint=checkpoint, journal=JournalOptions(journal)
                    )
                    print(result.status.code, sorted(entry.key for entry in await memory.list()))
            finally:
                await journal.close()

    asyncio.run(go())


if __name__ == "__main__":
    main()

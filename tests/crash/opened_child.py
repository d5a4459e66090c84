"""A child for ``test_crash_opened_conversation``: two tasks of one agent, run journal-first.

``quick`` answers at once; ``slow``'s model waits until ``quick`` completed (its completion
writes a whole snapshot while ``slow``'s conversation is open in the journal alone), then calls
the ``effect`` tool once. ``run`` dies (``os._exit``) right after that call returned; ``restore``
restores in a fresh process. Every execution of the tool is appended to ``effects.log``.

    python opened_child.py DIR run|restore jsonl|sqlite unsafe|idempotent
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
)
from oma_actors.events import ProgressEvent, TaskCompleted, ToolCalled
from oma_actors.journal import JournalOptions, JsonlRunJournal, open_journal
from oma_actors.llm import LLMResponse, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.stores import FileStore

CRASHED = 3


class Args(BaseModel):
    """The tool's input."""

    label: str


def main() -> None:
    """Run or restore, as the module docstring says."""
    folder, phase, journal_kind, effect = sys.argv[1:5]
    effects = os.path.join(folder, "effects.log")
    quick_done = asyncio.Event()

    def execute(args: Args, ctx: Any) -> str:  # sync: its write is this process's record
        with open(effects, "a", encoding="utf-8") as log:
            log.write(f"{args.label}@{ctx.tool_call_id}\n")
        return f"committed:{args.label}"

    tool = define_tool(
        name="effect", description="d", input_model=Args, execute=execute, effect=effect
    )

    class Model:
        async def chat(self, messages: Any, options: Any) -> LLMResponse:
            title = messages[0].content[0].text.splitlines()[0].removeprefix("# Task: ")
            if title == "quick":
                return LLMResponse([TextBlock("quick done")], usage=TokenUsage(1, 1))
            if isinstance(messages[-1].content[0], ToolResultBlock):
                return LLMResponse([TextBlock("slow done")], usage=TokenUsage(1, 1))
            if phase == "run":
                await quick_done.wait()
            call = ToolUseBlock("call-1", "effect", {"label": "X"})
            return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))

    team = Team("t", [AgentConfig("w", adapter=Model(), tools=[tool])])
    tasks = [
        Task("quick", "q", assignee="w", id="quick"),
        Task("slow", "s", assignee="w", id="slow"),
    ]

    def observe(event: ProgressEvent) -> None:
        if isinstance(event, TaskCompleted) and event.task_id == "quick":
            quick_done.set()
        if phase == "run" and isinstance(event, ToolCalled) and not event.replayed:
            os._exit(CRASHED)  # a crash right after the call returned: no cleanup runs

    async def go() -> None:
        checkpoint = CheckpointOptions(store=FileStore(os.path.join(folder, "s.json")), run_id="r1")
        journal = (
            JsonlRunJournal(os.path.join(folder, "j.jsonl"))
            if journal_kind == "jsonl"
            else open_journal(f"sqlite:///{folder}/j.db")
        )
        oma = OpenMultiAgent(on_progress=observe)
        try:
            if phase == "run":
                await oma.run_tasks(
                    team, tasks, checkpoint=checkpoint, journal=JournalOptions(journal)
                )
            else:
                result = await oma.restore(
                    team, checkpoint=checkpoint, journal=JournalOptions(journal)
                )
                print(result.status.code, [(task.id, task.status) for task in result.tasks])
        finally:
            await journal.close()

    asyncio.run(go())


if __name__ == "__main__":
    main()

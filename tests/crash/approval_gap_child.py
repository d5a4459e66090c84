"""A child for ``test_crash_approval_gap``: two parallel tasks, one call gated for review.

Task ``a`` makes one idempotent call; task ``g`` one ``unsafe`` call, which the tool-call
gate suspends. Every tool execution is appended to ``effects.log``; the approvals a phase
leaves pending are written to ``pending.json`` for ``decide``.

    python approval_gap_child.py DIR run|restore|decide jsonl|sqlite [CRASH_POINT]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
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
from oma_actors.approvals import Allow, Reviewer, Suspend, decide_approval
from oma_actors.journal import JournalOptions, JsonlRunJournal, RunJournal, open_journal
from oma_actors.llm import LLMResponse, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.stores import FileStore, open_store
from oma_actors.testing.crash_points import CrashPoint, crash_at


class Args(BaseModel):
    """The tools' input."""

    label: str


def main() -> None:
    """Run a phase, as the module docstring says."""
    folder, phase, kind = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    crash = sys.argv[4] if len(sys.argv) > 4 else None

    def tool(name: str) -> Any:
        def execute(args: Args, ctx: Any) -> str:  # sync: its write is this process's record
            with (folder / "effects.log").open("a", encoding="utf-8") as log:
                log.write(f"{args.label}\n")
            return f"ok:{args.label}"

        effect = "unsafe" if name == "unsafe" else "idempotent"
        return define_tool(
            name=name, description="d", input_model=Args, execute=execute, effect=effect
        )

    class Model:
        async def chat(self, messages: Any, options: Any) -> LLMResponse:
            title = messages[0].content[0].text.splitlines()[0].removeprefix("# Task: ")
            last = messages[-1].content[0]
            if isinstance(last, ToolResultBlock):
                return LLMResponse(
                    [TextBlock(f"{title} done: {last.content}")], usage=TokenUsage(1, 1)
                )
            call = ToolUseBlock(
                f"{title}-1", "unsafe" if title == "g" else "safe", {"label": title}
            )
            return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))

    team = Team("t", [AgentConfig("w", adapter=Model(), tools=[tool("safe"), tool("unsafe")])])
    tasks = [Task("a", "a", id="a", assignee="w"), Task("g", "g", id="g", assignee="w")]

    def gate(call: Any) -> Any:
        return Suspend("review") if call.tool_name == "unsafe" else Allow()

    async def go() -> None:
        async with (
            open_store(f"sqlite:///{folder}/s.db") if kind == "sqlite" else _file(folder) as store
        ):
            journal: RunJournal = (
                open_journal(f"sqlite:///{folder}/s.db")
                if kind == "sqlite"
                else JsonlRunJournal(str(folder / "j.jsonl"))
            )
            try:
                await phase_of(store, journal)
            finally:
                await journal.close()

    async def phase_of(store: Any, journal: RunJournal) -> None:
        pending = folder / "pending.json"
        if phase == "decide":
            for request_id, request_hash in json.loads(pending.read_text()):
                await decide_approval(
                    store, request_id=request_id, request_hash=request_hash,
                    decision="approve", reviewer=Reviewer("ann"),
                )  # fmt: skip
            return
        oma = OpenMultiAgent(max_concurrency=2, on_tool_call=gate)
        checkpoint = CheckpointOptions(store=store, run_id="r")
        options = JournalOptions(journal)

        async def attempt() -> Any:
            if phase == "run":
                return await oma.run_tasks(team, tasks, checkpoint=checkpoint, journal=options)
            return await oma.restore(team, checkpoint=checkpoint, journal=options)

        if crash is None:
            result = await attempt()
        else:
            with crash_at(CrashPoint.parse(crash)):
                result = await attempt()
        if result.pending_approvals:
            pending.write_text(
                json.dumps([[a.id, a.request_hash] for a in result.pending_approvals])
            )
        print(result.status.code, [(t.id, t.status) for t in result.tasks])

    asyncio.run(go())


class _file:
    """A FileStore as an async context (as ``open_store`` gives the SQLite one)."""

    def __init__(self, folder: Path) -> None:
        self.store = FileStore(os.path.join(folder, "s.json"))

    async def __aenter__(self) -> FileStore:
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()

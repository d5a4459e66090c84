"""Issue 18: what the dispatch marks cost; and how a multi-task run's saves are made.

Two tables, every figure a median of interleaved repeats in one process (BENCH.md):

1. **P2-style, unsafe-heavy**: one agent, ``--turns`` turns, each asking for one ``unsafe`` tool
   call (so every turn has a ``tool_dispatch`` boundary: 4 boundaries per turn), journal-first on
   a JSONL journal beside a FileStore. Time per turn with the dispatch mark written (today) and
   with it switched off (``RunWriter._mark_dispatched`` a no-op: the journal before issue 18),
   run by run interleaved; their ratio is the marks' cost.
2. **Saves by mode** of a ``--tasks``-task run (each task: one unsafe tool turn, then an
   answer), counted from ``CheckpointSaved.mode``: whole-snapshot compactions against
   journal-only saves. (Session 5 measured 21 compactions before a task's admission became a
   journal append, 11 after; the rule it removed no longer exists to be put back.)

Run: ``.venv/bin/python bench/dispatch_marks.py [--turns 300] [--repeats 3] [--tasks 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

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
from oma_actors.checkpoint.run_writer import RunWriter
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter


class Charge(BaseModel):
    i: int


def agent(name: str, turns: int) -> AgentConfig:
    """An agent asking for ``turns`` unsafe calls (one a turn, 1 KiB results), then answering."""

    async def charge(args: Charge, ctx: ToolContext) -> str:
        return f"charged {args.i} " + "x" * 1000

    tool = define_tool(
        name="charge", description="Charge a card.", input_model=Charge, execute=charge,
        effect="unsafe",
    )  # fmt: skip

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        n = sum(1 for m in messages if m.role == "assistant")
        if n < turns:
            return LLMResponse(
                [ToolUseBlock(f"{name}-{n}", "charge", {"i": n})],
                stop_reason="tool_use",
                usage=TokenUsage(1, 1),
            )
        return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))

    return AgentConfig(name, adapter=ScriptedAdapter(script), tools=[tool], max_turns=turns + 5)


async def one_run(folder: Path, tasks: int, turns: int) -> tuple[float, dict[str, int]]:
    """One journal-first run: its wall time and its saves by mode."""
    saves: dict[str, int] = {}

    def count(event: ProgressEvent) -> None:
        if isinstance(event, CheckpointSaved):
            saves[event.mode] = saves.get(event.mode, 0) + 1

    team = Team("bench", agents=[agent(f"w{t}", turns) for t in range(tasks)])
    work = [Task(f"t{t}", "Charge.", id=f"t{t}", assignee=f"w{t}") for t in range(tasks)]
    journal = JsonlRunJournal(folder / "run.jsonl", flush_interval_ms=0)
    async with FileStore.open(folder / "state.json") as store:
        start = time.perf_counter()
        await OpenMultiAgent(on_progress=count, max_concurrency=1).run_tasks(
            team,
            work,
            checkpoint=CheckpointOptions(store=store, run_id="bench"),
            journal=JournalOptions(journal, durable=True),
        )
        elapsed = time.perf_counter() - start
    await journal.close()
    return elapsed, saves


async def no_marks(self: RunWriter, run: object, seq: int) -> None:
    """``RunWriter._mark_dispatched`` switched off (the journal before issue 18)."""


CURRENT_MARK = RunWriter._mark_dispatched


async def main(turns: int, repeats: int, tasks: int) -> None:
    times: dict[str, list[float]] = {"marks": [], "no marks": []}
    for _ in range(repeats):
        for variant in ("marks", "no marks"):  # interleaved, run by run
            RunWriter._mark_dispatched = CURRENT_MARK if variant == "marks" else no_marks  # type: ignore[method-assign,assignment]
            with tempfile.TemporaryDirectory() as folder:
                elapsed, _ = await one_run(Path(folder), 1, turns)
            times[variant].append(elapsed / turns)
    RunWriter._mark_dispatched = CURRENT_MARK  # type: ignore[method-assign]
    print(f"unsafe-heavy run, {turns} turns x 1 unsafe call, JSONL journal + FileStore")
    print(f"| variant | per turn (median of {repeats}) | runs |")
    print("|---|---|---|")
    for name, values in times.items():
        runs = ", ".join(f"{v * 1e3:.2f}" for v in values)
        print(f"| {name} | {statistics.median(values) * 1e3:.2f} ms | {runs} ms |")
    ratio = statistics.median(times["marks"]) / statistics.median(times["no marks"])
    paired = [a / b for a, b in zip(times["marks"], times["no marks"], strict=True)]
    print(f"marks / no marks: {ratio:.2f}x (paired runs: {', '.join(f'{p:.2f}' for p in paired)})")

    print(f"\n{tasks}-task run (each: 1 unsafe tool turn, then an answer)")
    with tempfile.TemporaryDirectory() as folder:
        _, saves = await one_run(Path(folder), tasks, 1)
    print("| whole-snapshot compactions | journal-only saves |")
    print("|---|---|")
    print(f"| {saves.get('snapshot', 0)} | {saves.get('journal', 0)} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.repeats, args.tasks))

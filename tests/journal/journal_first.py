"""Journal-first runs on a FileStore and a JSONL journal, and the files a crash leaves (D10, D15).

``crash_image`` runs a task whose tool charges a card (an effect counted on a ledger outside the
run) and then never returns; while it hangs, the store file and the journal are copied, which is
exactly what a process killed at that point leaves on disk. The run is then cancelled and the
copies are put back, so a restore sees the crash's files and nothing the cancellation wrote.
(The killed-process version of this is ``tests/crash/test_crash_journal_ref.py``.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
    define_tool,
)
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter

RUN_ID = "card-1"


class Charge(BaseModel):
    cents: int


def two_charges(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Turn 1 and 2 each charge once (call ids c0, c1); turn 3 answers."""
    n = sum(1 for m in messages if m.role == "assistant")
    if n < 2:
        return LLMResponse(
            [ToolUseBlock(f"c{n}", "charge", {"cents": 100})], stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )  # fmt: skip
    seen = " | ".join(
        str(getattr(block, "content", ""))
        for message in messages
        for block in message.content
        if getattr(block, "type", "") == "tool_result"
    )
    return LLMResponse([TextBlock(f"done: {seen}")], usage=TokenUsage(1, 1))


@dataclass
class Ledger:
    """The card's charges, kept outside the run (a crash cannot take them back)."""

    charges: list[str] = field(default_factory=list)
    hang_on: str | None = None  # the call id whose tool never returns (the "crash")
    hanging: asyncio.Event = field(default_factory=asyncio.Event)

    def team(self, effect: str = "unsafe") -> Team:
        async def charge(args: Charge, ctx: ToolContext) -> str:
            self.charges.append(ctx.tool_call_id)
            if ctx.tool_call_id == self.hang_on:
                self.hanging.set()
                await asyncio.Event().wait()  # the process dies here
            return f"charged {args.cents}"

        tool = define_tool(
            name="charge", description="charge the card", input_model=Charge, execute=charge,
            effect=effect,  # type: ignore[arg-type]
        )  # fmt: skip
        agent = AgentConfig("w", adapter=ScriptedAdapter(two_charges), tools=[tool])
        return Team("t", [agent])


def the_task() -> list[Task]:
    return [Task("pay", "pay the invoice", assignee="w", id="pay")]


async def crash_image(
    state: Path,
    journal_path: Path,
    *,
    durable: bool = True,
    hang_on: str = "c1",
    effect: str = "unsafe",
) -> Ledger:
    """Run until the tool of call ``hang_on`` charged the card, and leave what a crash leaves."""
    ledger = Ledger(hang_on=hang_on)
    store = FileStore(state)
    journal = JsonlRunJournal(journal_path, flush_interval_ms=0)
    run = asyncio.ensure_future(
        OpenMultiAgent().run_tasks(
            ledger.team(effect), the_task(),
            checkpoint=CheckpointOptions(store=store, run_id=RUN_ID),
            journal=JournalOptions(journal, durable=durable),
        )
    )  # fmt: skip
    await asyncio.wait_for(ledger.hanging.wait(), 30)
    image = await asyncio.to_thread(_read, state, journal_path)
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    await journal.close()
    await store.aclose()
    await asyncio.to_thread(_write, zip((state, journal_path), image, strict=True))
    return ledger


def _read(*paths: Path) -> tuple[bytes, ...]:
    return tuple(path.read_bytes() for path in paths)


def _write(files: Iterable[tuple[Path, bytes]]) -> None:
    for path, data in files:
        path.write_bytes(data)


async def restore_charging(
    state: Path,
    *,
    journal: JsonlRunJournal | None = None,
    on_damaged: str = "refuse",
    effect: str = "unsafe",
) -> tuple[TeamRunResult, Ledger]:
    """Restore the run with a fresh ledger (its charges are the restore's re-runs)."""
    ledger = Ledger()
    store = FileStore(state)
    try:
        result = await OpenMultiAgent().restore(
            ledger.team(effect), checkpoint=CheckpointOptions(store=store, run_id=RUN_ID),
            journal=journal, on_damaged_journal=on_damaged,  # type: ignore[arg-type]
        )  # fmt: skip
    finally:
        await store.aclose()
    return result, ledger


async def finished_run(state: Path, journal_path: Path, *, run_id: str) -> None:
    """A journal-first run of two charges, to its end."""
    ledger = Ledger()
    store = FileStore(state)
    journal = JsonlRunJournal(journal_path, flush_interval_ms=0)
    try:
        result = await OpenMultiAgent().run_tasks(
            ledger.team(), the_task(),
            checkpoint=CheckpointOptions(store=store, run_id=run_id),
            journal=JournalOptions(journal),
        )  # fmt: skip
    finally:
        await journal.close()
        await store.aclose()
    assert result.success

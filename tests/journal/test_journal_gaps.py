"""A hole in a journal-first snapshot's tail is lost events, never a tail to fold across.

A run's seqs are consecutive in its journal, so the tail a restore reads starts at the seq the
fold reads from and has no hole. Folding across one skipped the conversation whose prompt was
lost, and the task started over, running its recorded calls again (``unsafe`` ones included):
an ``InMemoryRunJournal`` evicts its oldest events once full, whether a snapshot holds them or
not, and a journal file may be cut in the middle.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
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
from oma_actors.errors import JournalDamagedError
from oma_actors.events import ProgressEvent, ToolCalled
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal, RunJournal
from oma_actors.llm import LLMResponse, Message, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore, MemoryStore
from oma_actors.testing import ScriptedAdapter

CALLS = 7


class Args(BaseModel):
    label: str


def team(ran: list[str]) -> Team:
    def execute(args: Args, ctx: Any) -> str:
        ran.append(args.label)
        return f"done {args.label}"

    tool = define_tool(
        name="launch", description="d", input_model=Args, execute=execute, effect="unsafe"
    )

    def script(messages: list[Message], options: Any) -> LLMResponse:
        n = sum(isinstance(b, ToolResultBlock) for m in messages for b in m.content)
        if n < CALLS + 1:
            call = ToolUseBlock(f"c{n}", "launch", {"label": f"L{n}"})
            return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))
        return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))

    worker = AgentConfig("w", adapter=ScriptedAdapter(script), tools=[tool], max_turns=20)
    return Team("t", [worker])


async def interrupted(store: MemoryStore, journal: RunJournal, ran: list[str]) -> None:
    """A journal-first run of one task, aborted right after its last call ran."""
    run: list[asyncio.Future[Any]] = []

    def observe(event: ProgressEvent) -> None:
        if isinstance(event, ToolCalled) and event.tool_call_id == f"c{CALLS - 1}":
            run[0].cancel()

    oma = OpenMultiAgent(on_progress=observe)
    checkpoint = CheckpointOptions(store=store, run_id="r")
    task = Task("a", "x", assignee="w", id="a")
    options = JournalOptions(journal, durable=True)
    run.append(
        asyncio.ensure_future(
            oma.run_tasks(team(ran), [task], checkpoint=checkpoint, journal=options)
        )
    )
    with pytest.raises(asyncio.CancelledError):
        await run[0]
    assert ran == [f"L{n}" for n in range(CALLS)]


async def restore(store: MemoryStore, journal: RunJournal, ran: list[str], **kw: Any) -> Any:
    return await OpenMultiAgent().restore(
        team(ran),
        checkpoint=CheckpointOptions(store=store, run_id="r"),
        journal=JournalOptions(journal, durable=True),
        **kw,
    )


async def test_a_journal_that_evicted_unsaved_events_is_damaged() -> None:
    store, journal, ran = InMemoryStore(), InMemoryRunJournal(max_events=30), []
    await interrupted(store, journal, ran)
    with pytest.raises(JournalDamagedError) as caught:
        await restore(store, journal, ran)
    assert "events were lost" in caught.value.reason
    assert len(ran) == CALLS  # refused before anything ran
    result = await restore(store, journal, ran, on_damaged_journal="salvage")
    assert result.status.code in ("ok", "error")
    assert ran[:CALLS] == [f"L{n}" for n in range(CALLS)]
    assert len(set(ran)) == len(ran)  # no call ran twice


async def test_a_journal_file_cut_in_the_middle_is_damaged(tmp_path: Path) -> None:
    store, path, ran = InMemoryStore(), tmp_path / "run.jsonl", []
    journal = JsonlRunJournal(str(path), flush_interval_ms=0)
    await interrupted(store, journal, ran)
    await journal.close()
    lines = path.read_bytes().splitlines(keepends=True)
    prompt = next(i for i, line in enumerate(lines) if json.loads(line).get("origin") == "input")
    path.write_bytes(b"".join(lines[:prompt] + lines[prompt + 1 :]))  # the prompt's line goes
    reopened = JsonlRunJournal(str(path), flush_interval_ms=0)
    try:
        with pytest.raises(JournalDamagedError) as caught:
            await restore(store, reopened, ran)
    finally:
        await reopened.close()
    assert "events were lost" in caught.value.reason
    assert len(ran) == CALLS

"""Runs sharing one journal share its fsyncs (group commit, D10), and each restores its own tail."""

from __future__ import annotations

import asyncio
import json
import os
import time
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
    define_tool,
)
from oma_actors.checkpoint import Checkpoint
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.journal.batching import GroupCommit
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.orchestration.journal_setup import fold_restored
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter

TURNS = 8


class Note(BaseModel):
    text: str


def turns(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    n = sum(1 for m in messages if m.role == "assistant")
    if n < TURNS:
        return LLMResponse(
            [ToolUseBlock(f"c{n}", "note", {"text": "x"})], stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )  # fmt: skip
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


def team(effects: list[str]) -> Team:
    async def note(args: Note, ctx: ToolContext) -> str:
        effects.append(f"{ctx.run_id}:{ctx.tool_call_id}")
        return "noted"

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(turns), tools=[tool], max_turns=20)])


async def test_concurrent_runs_on_one_journal_share_fsyncs_and_restore_their_own_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        # A slow disk: while one batch is on its way, the other runs' appends pile up behind it.
        time.sleep(0.005)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    batches: list[set[str]] = []
    real_write = JsonlRunJournal._write

    def write(self: JsonlRunJournal, text: str) -> None:
        batches.append({json.loads(line)["runId"] for line in text.splitlines()})
        real_write(self, text)

    monkeypatch.setattr(JsonlRunJournal, "_write", write)
    journal = JsonlRunJournal(tmp_path / "shared.jsonl", flush_interval_ms=0)
    events: list[ProgressEvent] = []
    effects: list[str] = []
    runs = [f"run-{i}" for i in range(4)]
    stores = {run: FileStore(tmp_path / f"{run}.json") for run in runs}
    orchestrator = OpenMultiAgent(on_progress=events.append)
    results = await asyncio.gather(
        *(
            orchestrator.run_tasks(
                team(effects),
                [Task("a", "x", assignee="w", id="a")],
                checkpoint=CheckpointOptions(store=stores[run], run_id=run),
                journal=JournalOptions(journal),
            )
            for run in runs
        )
    )
    assert all(result.success for result in results)
    await journal.close()
    saves = [e for e in events if isinstance(e, CheckpointSaved) and e.mode == "journal"]
    assert len(saves) >= 4 * 2 * TURNS  # most per-turn boundaries of the four runs
    # A batch is one write and one fsync, and batches carry several runs: one fsync served
    # every run whose events it held, so the runs made fewer fsyncs than journal saves.
    shared = [batch for batch in batches if len(batch) > 1]
    assert len(shared) >= len(batches) // 3, batches
    assert len(batches) < len(saves)
    assert len(effects) == 4 * TURNS

    # Each run's restore reads only its own events from the shared file.
    reader = JsonlRunJournal(tmp_path / "shared.jsonl")
    for run in runs:
        stored = await Checkpoint(stores[run], run_id=run).load_latest()
        assert stored is not None
        folded = await fold_restored(stored, JournalOptions(reader), team([]), events.append)
        assert folded.run_id == run
    assert not [e for e in events if type(e).__name__ == "JournalTailDiscarded"]


async def test_a_commit_cancelled_midway_cancels_its_items_and_is_not_swallowed() -> None:
    started = asyncio.Event()

    async def commit(items: Sequence[str]) -> Sequence[str]:
        started.set()
        await asyncio.sleep(30)  # a database that does not answer
        return list(items)

    group: GroupCommit[str, str] = GroupCommit(commit, window_s=0)
    item = group.enqueue("a", now=True)
    await started.wait()
    [flusher] = list(group._flushers)
    flusher.cancel()  # the loop shutting down
    with pytest.raises(asyncio.CancelledError):
        await flusher  # the flusher itself ends cancelled: it did not swallow it
    assert item.cancelled()  # nobody waits forever for a batch that will never answer

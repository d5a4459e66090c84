"""Journal-first durability when the journal fails (decision D10, D2).

A boundary saved by the journal counts as saved only once its events are durable: a failed
append is a failed save (``CheckpointSaveFailed``), a strict one stops the step that needed it
(an ``unsafe`` tool is not run), and the next boundary writes the whole snapshot, because what
the journal holds is no longer known to fold into the run's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
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
    ToolContext,
    define_tool,
)
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed, ProgressEvent
from oma_actors.journal import InMemoryRunJournal, JournalEvent, JournalOptions, JsonlRunJournal
from oma_actors.llm import (
    ChatOptions,
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.testing import ScriptedAdapter


class Note(BaseModel):
    text: str


class FailingJournal:
    """A journal whose appends fail while ``failing(events)`` says so."""

    def __init__(self, inner: JsonlRunJournal, failing: Callable[[Sequence[JournalEvent]], bool]):
        self.inner = inner
        self.failing = failing
        self.failures = 0

    async def append(self, events: Sequence[JournalEvent]) -> None:
        if self.failing(events):
            self.failures += 1
            raise OSError(28, "No space left on device")
        await self.inner.append(events)

    async def read_from(self, seq: int) -> list[JournalEvent]:
        return await self.inner.read_from(seq)

    async def close(self) -> None:
        await self.inner.close()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def two_turns(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    n = sum(1 for m in messages if m.role == "assistant")
    if n < 2:
        return LLMResponse(
            [ToolUseBlock(f"c{n}", "send", {"text": "x"})], stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )  # fmt: skip
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


async def run(
    tmp_path: Path, effect: str, failing: Callable[[Sequence[JournalEvent]], bool]
) -> tuple[list[ProgressEvent], list[str], FailingJournal, Any]:
    effects: list[str] = []

    async def send(args: Note, ctx: ToolContext) -> str:
        effects.append(ctx.tool_call_id)
        return "sent"

    tool = define_tool(
        name="send", description="s", input_model=Note, execute=send,
        effect=effect,  # type: ignore[arg-type]
    )  # fmt: skip
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(two_turns), tools=[tool])])
    journal = FailingJournal(JsonlRunJournal(tmp_path / "j.jsonl", flush_interval_ms=0), failing)
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(
        team, [Task("a", "x", assignee="w", id="a")],
        checkpoint=CheckpointOptions(store=FileStore(tmp_path / "s.json"), run_id="f1"),
        journal=JournalOptions(journal),  # type: ignore[arg-type]
    )  # fmt: skip
    return events, effects, journal, result


def saves(events: list[ProgressEvent]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    for event in events:
        if isinstance(event, CheckpointSaved):
            out.append((event.boundary, event.mode))
        elif isinstance(event, CheckpointSaveFailed):
            out.append((event.boundary, "failed"))
    return out


async def test_an_unsafe_tool_whose_dispatch_append_fails_is_not_run(tmp_path: Path) -> None:
    def dispatch_of_c0(events: Sequence[JournalEvent]) -> bool:
        return any(e.type == "tool/call" and e.data["call"]["id"] == "c0" for e in events)

    events, effects, journal, result = await run(tmp_path, "unsafe", dispatch_of_c0)
    assert journal.failures == 1
    assert effects == ["c1"]  # c0 was never run: its dispatch record is not durable
    failed = [e for e in events if isinstance(e, CheckpointSaveFailed)]
    assert [(e.boundary, e.strict) for e in failed] == [("tool_dispatch", True)]
    conversation = result.agent_results["w"].messages
    answers = [
        b for m in conversation for b in m.content
        if isinstance(b, ToolResultBlock) and b.tool_use_id == "c0"
    ]  # fmt: skip
    assert answers
    assert answers[0].is_error
    assert "TOOL_DISPATCH_NOT_DURABLE" in str(answers[0].content)


async def test_after_a_failed_append_the_next_boundary_writes_the_snapshot(
    tmp_path: Path,
) -> None:
    def result_of_c0(events: Sequence[JournalEvent]) -> bool:
        return any(e.type == "tool/result" and e.data["toolCallId"] == "c0" for e in events)

    events, effects, _journal, result = await run(tmp_path, "idempotent", result_of_c0)
    assert result.success
    assert effects == ["c0", "c1"]
    order = saves(events)
    failed = order.index(("tool_commit", "failed"))
    # The boundary after the failure compacts: the journal now has a hole the fold must not
    # cross, and only a snapshot covers it.
    assert order[failed + 1] == ("tool_results", "snapshot"), order
    # Before the failure and after the compaction, per-turn boundaries are journal appends.
    assert ("assistant_tool_turn", "journal") in order[failed + 2 :], order


async def test_an_in_memory_journal_never_replaces_the_snapshots_of_a_persistent_store(
    tmp_path: Path,
) -> None:
    # A crash would take the journal's saves with it while the file kept an older snapshot:
    # journal-only saves would be weaker than the snapshots they replace.
    events: list[ProgressEvent] = []
    effects: list[str] = []

    async def send(args: Note, ctx: ToolContext) -> str:
        effects.append(ctx.tool_call_id)
        return "sent"

    tool = define_tool(name="send", description="s", input_model=Note, execute=send)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(two_turns), tools=[tool])])
    for store, modes in (
        (FileStore(tmp_path / "s.json"), {"snapshot"}),
        (InMemoryStore(), {"snapshot", "journal"}),
    ):
        events.clear()
        result = await OpenMultiAgent(on_progress=events.append).run_tasks(
            team, [Task("a", "x", assignee="w", id="a")],
            checkpoint=CheckpointOptions(store=store, run_id="m1"),
            journal=InMemoryRunJournal(),
        )  # fmt: skip
        assert result.success
        assert {e.mode for e in events if isinstance(e, CheckpointSaved)} == modes


async def test_a_journal_of_our_own_without_dispatch_marks_restores(tmp_path: Path) -> None:
    # A ``RunJournal`` that keeps no dispatch marks (only JR-01's methods): the restore folds
    # its tail without reading marks (there are none to read), and nothing runs twice.
    effects: list[str] = []

    async def send(args: Note, ctx: ToolContext) -> str:
        effects.append(ctx.tool_call_id)
        return "sent"

    tool = define_tool(name="send", description="s", input_model=Note, execute=send)
    journal = FailingJournal(
        JsonlRunJournal(tmp_path / "j.jsonl", flush_interval_ms=0), lambda events: False
    )
    options = CheckpointOptions(store=FileStore(tmp_path / "s.json"), run_id="own")

    def team() -> Team:
        return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(two_turns), tools=[tool])])

    running: list[asyncio.Task[Any]] = []

    def stop_after_first_turn(event: ProgressEvent) -> None:
        if isinstance(event, CheckpointSaved) and event.boundary == "tool_results":
            running[0].cancel()  # an abort after the first turn's results are saved

    running.append(
        asyncio.ensure_future(
            OpenMultiAgent(on_progress=stop_after_first_turn).run_tasks(
                team(),
                [Task("a", "x", assignee="w", id="a")],
                checkpoint=options,
                journal=JournalOptions(journal),  # type: ignore[arg-type]
            )
        )
    )
    with pytest.raises(asyncio.CancelledError):
        await running[0]
    assert effects == ["c0"]
    result = await OpenMultiAgent().restore(
        team(), checkpoint=options,
        journal=JournalOptions(journal),  # type: ignore[arg-type]
    )  # fmt: skip
    assert result.success
    assert effects == ["c0", "c1"]  # c0's result was replayed from the journal

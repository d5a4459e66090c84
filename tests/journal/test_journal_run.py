"""A run with a journal in OMA's mode: v5 snapshots, the events, and tail replay (JR-18)."""

from __future__ import annotations

import asyncio
import json
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
from oma_actors.events import (
    CheckpointSaved,
    CheckpointSaveFailed,
    JournalTailDiscarded,
    ProgressEvent,
)
from oma_actors.journal import (
    InMemoryRunJournal,
    JournalEvent,
    JournalOptions,
    JsonlRunJournal,
    verify_run,
)
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FailingStore, ScriptedAdapter


class Note(BaseModel):
    text: str


def one_tool(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) == 1:
        return LLMResponse(
            [ToolUseBlock("call-1", "note", {"text": "x"})], stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )  # fmt: skip
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


def team_with(effects: list[str]) -> Team:
    async def note(args: Note, ctx: ToolContext) -> str:
        effects.append(ctx.tool_call_id)
        return f"noted {args.text}"

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(one_tool), tools=[tool])])


def options(store: object) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id="j1")  # type: ignore[arg-type]


async def test_a_journaled_run_writes_v5_snapshots_and_a_verifiable_journal(
    tmp_path: Path,
) -> None:
    store = InMemoryStore()
    journal = JsonlRunJournal(tmp_path / "run.jsonl")
    effects: list[str] = []
    result = await OpenMultiAgent().run_tasks(
        team_with(effects), [Task("a", "x", assignee="w")], checkpoint=options(store),
        journal=JournalOptions(journal, durable=False),
    )  # fmt: skip
    await journal.close()
    assert result.success
    events = await JsonlRunJournal(tmp_path / "run.jsonl").read_from(0)
    types = [e.type for e in events]
    assert types[0] == "run/start"
    assert types[-1] == "run/end"
    for expected in ("user/message", "assistant/message", "tool/call", "tool/result"):
        assert expected in types
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert (await verify_run(events)).ok
    entry = await store.get("__oma_checkpoint__/j1/latest")
    assert entry is not None
    raw = json.loads(entry.value)
    assert raw["version"] == 5
    assert 0 < raw["journalWatermarkSeq"] <= events[-1].seq
    assert raw["journalRef"]["path"].endswith("run.jsonl")


async def test_jr18_a_committed_result_only_in_the_journal_is_replayed_not_re_run() -> None:
    # The tool committed and its tool/result was journaled, but the checkpoint save after it
    # failed and the process stopped: restore with the journal folds the commit in.
    async def run_and_abort(journal: InMemoryRunJournal, inner: InMemoryStore) -> list[str]:
        effects: list[str] = []
        store = FailingStore(
            inner, times=None, exc_factory=lambda: OSError(28, "No space left"),
            predicate=lambda _k, value: isinstance(value, dict) and '"commit"' in json.dumps(value),
        )  # fmt: skip
        stopped = asyncio.Event()

        def observe(event: ProgressEvent) -> None:
            if isinstance(event, CheckpointSaveFailed) and event.boundary == "tool_commit":
                stopped.set()

        run = asyncio.ensure_future(
            OpenMultiAgent(on_progress=observe).run_tasks(
                team_with(effects), [Task("a", "x", assignee="w", id="task-a")],
                checkpoint=options(store), journal=JournalOptions(journal, durable=False),
            )
        )  # fmt: skip
        await stopped.wait()
        run.cancel()  # the "crash": nothing after the failed save
        with pytest.raises(asyncio.CancelledError):
            await run
        for _ in range(100):  # the best-effort append lands on its own
            if any(e.type == "tool/result" for e in await journal.read_from(0)):
                break
            await asyncio.sleep(0.01)
        return effects

    journal, inner = InMemoryRunJournal(), InMemoryStore()
    assert await run_and_abort(journal, inner) == ["call-1"]
    stored = await Checkpoint(inner, run_id="j1").load_latest()
    assert stored is not None
    assert all(item.commit is None for e in stored.in_flight for item in e.state.pending)

    again: list[str] = []
    restored = await OpenMultiAgent().restore(
        team_with(again), checkpoint=options(inner), journal=JournalOptions(journal, durable=False)
    )
    assert restored.success
    assert again == []  # replayed from the journal, not run again

    # Without the journal the same checkpoint re-runs the call (the snapshot alone lacks it).
    journal2, inner2 = InMemoryRunJournal(), InMemoryStore()
    await run_and_abort(journal2, inner2)
    rerun: list[str] = []
    await OpenMultiAgent().restore(team_with(rerun), checkpoint=options(inner2))
    assert rerun == ["call-1"]


async def test_a_tail_that_fails_a_fold_check_is_discarded_with_an_event() -> None:
    store, journal = InMemoryStore(), InMemoryRunJournal()
    stopped = asyncio.Event()

    def observe(event: ProgressEvent) -> None:
        if isinstance(event, CheckpointSaved) and event.boundary == "assistant_tool_turn":
            stopped.set()

    gate = asyncio.Event()

    async def slow_note(args: Note, ctx: ToolContext) -> str:
        await gate.wait()
        return "never"

    tool = define_tool(name="note", description="n", input_model=Note, execute=slow_note)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(one_tool), tools=[tool])])
    run = asyncio.ensure_future(
        OpenMultiAgent(on_progress=observe).run_tasks(
            team, [Task("a", "x", assignee="w", id="task-a")], checkpoint=options(store),
            journal=JournalOptions(journal, durable=False),
        )
    )  # fmt: skip
    await stopped.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0.05)
    last = max(e.seq for e in await journal.read_from(0))
    # A result for a call the saved turn never asked for: the fold must refuse the whole tail.
    await journal.append([
        JournalEvent(
            seq=last + 1, type="tool/result", run_id="j1", attempt=1, timestamp_unix_ms=0,
            task_id="task-a", agent_name="w",
            data={"toolCallId": "bogus", "result": {
                "type": "tool_result", "tool_use_id": "bogus", "content": "forged"}},
        )
    ])  # fmt: skip
    events: list[ProgressEvent] = []
    effects: list[str] = []
    restored = await OpenMultiAgent(on_progress=events.append).restore(
        team_with(effects),
        checkpoint=options(store),
        journal=JournalOptions(journal, durable=False),
    )
    discarded = [e for e in events if isinstance(e, JournalTailDiscarded)]
    assert len(discarded) == 1
    assert "bogus" in discarded[0].reason or discarded[0].reason
    assert restored.success  # the snapshot, the recovery anchor, still resumes the run
    assert effects == ["call-1"]

"""A task retried after a failed try (``max_retries``): the timeline shows every try.

The failed try's model call raised a retryable error: its turn ends ``error`` in the journal, and
the retry starts a fresh conversation whose call ids repeat the failed try's. Each try keeps its
own turns and results; the run's history names the retried task at its ``attempt_reset`` and
``task_completed`` points, even while another task is the only one in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel
from test_timeline_render import text_at

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
from oma_actors.checkpoint import Checkpoint, run_history
from oma_actors.domain.messages import ChatOptions, Message
from oma_actors.errors import OverloadedError
from oma_actors.events import ProgressEvent, TaskCompleted
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter
from oma_actors.timeline import build_timeline, render_timeline_html


class Note(BaseModel):
    text: str


def asks(call_id: str) -> LLMResponse:
    return LLMResponse([ToolUseBlock(call_id, "note", {"text": "n"})], stop_reason="tool_use",
                       usage=TokenUsage(1, 1))  # fmt: skip


def done(text: str) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(1, 1))


async def test_every_try_of_a_retried_task_is_shown_with_its_own_calls(tmp_path: Path) -> None:
    noted: list[int] = []

    async def note(args: Note, ctx: ToolContext) -> str:
        noted.append(len(noted) + 1)
        return f"noted {noted[-1]}"

    calls = iter([asks("call-1"), None, asks("call-1"), done("second try done")])

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        response = next(calls)
        if response is None:  # the first try's second model call fails (retryable)
            raise OverloadedError("scripted", "overloaded")
        return response

    tool = define_tool(name="note", description="Note.", input_model=Note, execute=note)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(script), tools=[tool])])
    store = InMemoryStore()
    journal = JsonlRunJournal(tmp_path / "journal.jsonl")
    result = await OpenMultiAgent().run_tasks(
        team, [Task("retry", "x", id="t-r", max_retries=1, retry_delay_ms=0)],
        checkpoint=CheckpointOptions(store=store, run_id="run-r"), journal=journal,
    )  # fmt: skip
    await journal.close()
    assert result.success
    assert noted == [1, 2]
    snapshot = await Checkpoint(store, run_id="run-r").load_latest()
    assert snapshot is not None
    reader = JsonlRunJournal(tmp_path / "journal.jsonl")
    events = await reader.read_from(0)
    await reader.close()

    [lane] = build_timeline(snapshot, events).lanes
    assert (lane.tries, lane.attempts, lane.status) == (2, (1,), "completed")
    shown = [
        (t.task_try, t.index, t.outcome, t.text, [(c.call_id, c.mark, c.result) for c in t.calls])
        for t in lane.turns
    ]
    assert shown == [
        (1, 1, "tool_use", "", [("call-1", "executed", "noted 1")]),
        (1, 2, "error", "", []),  # the failed model call: no answer
        (2, 1, "tool_use", "", [("call-1", "executed", "noted 2")]),
        (2, 2, "completed", "second try done", []),
    ]

    text = text_at(80, build_timeline(snapshot, events))
    assert "4 turns" in text
    assert "tries 2" in text
    assert "turn 2  ✗ model call failed" in text
    assert "── try 2 (retry of the failed try) ──" in text
    assert "→ noted 1" in text
    assert "→ noted 2" in text
    page = render_timeline_html(build_timeline(snapshot, events))
    assert 'data-tries="2"' in page
    assert 'data-retry="2"' in page
    assert page.count('data-outcome="error"') == 1


async def test_the_history_names_the_retried_task_at_its_reset_and_completion(
    tmp_path: Path,
) -> None:
    # Task "a" is in flight (its tool waits) the whole time task "r" fails, is retried and
    # completes: the anchors of r's attempt_reset and task_completed hold only "a" in flight.
    a_running, r_done = asyncio.Event(), asyncio.Event()

    async def wait(args: Note, ctx: ToolContext) -> str:
        a_running.set()
        await r_done.wait()
        return "waited"

    tool = define_tool(name="note", description="Wait.", input_model=Note, execute=wait)
    r_calls = iter([None, done("r done")])

    class Flaky:
        async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
            response = next(r_calls)
            if response is None:
                await a_running.wait()
                raise OverloadedError("scripted", "overloaded")
            return response

    team = Team("t", [
        AgentConfig("wa", adapter=ScriptedAdapter([asks("call-a"), done("a done")]),
                    tools=[tool]),
        AgentConfig("wr", adapter=Flaky()),
    ])  # fmt: skip

    def observe(event: ProgressEvent) -> None:
        if isinstance(event, TaskCompleted) and event.task_id == "r":
            r_done.set()

    store = InMemoryStore()
    journal = JsonlRunJournal(tmp_path / "journal.jsonl")
    result = await OpenMultiAgent(on_progress=observe, max_concurrency=2).run_tasks(
        team,
        [Task("a", "x", assignee="wa", id="a"),
         Task("r", "y", assignee="wr", id="r", max_retries=1, retry_delay_ms=0)],
        checkpoint=CheckpointOptions(store=store, run_id="run-h"),
        journal=JournalOptions(journal, durable=True),
    )  # fmt: skip
    await journal.close()
    assert result.success
    reader = JsonlRunJournal(tmp_path / "journal.jsonl")
    try:
        points = await run_history(store, "run-h", journal=reader)
    finally:
        await reader.close()
    named = [(p.boundary, p.task_id) for p in points if p.boundary in ("attempt_reset",
                                                                          "task_completed")]  # fmt: skip
    assert named == [("attempt_reset", "r"), ("task_completed", "r"), ("task_completed", "a")]

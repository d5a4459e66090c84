"""``run/end`` closes the journal on every exit path, a cancelled run included (spec 17.2).

OMA writes ``run/end`` on every exit path; a run cancelled mid-call (a host's ``CancelRun``, a
task cancelled by its caller) ended with no ``run/end`` at all, so a reader of the journal (a
watch, a viewer, ``verify_run``'s readers) could not tell a cancelled run from a live one. Each
way into a run (``run_tasks``, ``run_team``, ``restore``) is cancelled while a tool call blocks;
its journal then ends with ``run/end`` status ``aborted``, written once, and a restore of the
cancelled run still folds the journal and completes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
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
from oma_actors.domain.results import RunOutcome
from oma_actors.journal import InMemoryRunJournal, JournalEvent, JournalOptions
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.orchestration.journal_events import finish_journal
from oma_actors.orchestration.journaling import RunJournaling
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


class Args(BaseModel):
    text: str


class Gate:
    """A tool that blocks until released, and says when it started."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    def tool(self) -> Any:
        async def wait(args: Args, ctx: ToolContext) -> str:
            self.calls += 1
            self.started.set()
            await self.release.wait()
            return "released"

        return define_tool(name="wait", description="w", input_model=Args, execute=wait)


def worker_script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) == 1:
        call = ToolUseBlock("call-1", "wait", {"text": "x"})
        return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(2, 1))
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


def team(gate: Gate) -> Team:
    worker = AgentConfig("worker", adapter=ScriptedAdapter(worker_script), tools=[gate.tool()])
    return Team("t", [worker])


def lead() -> AgentConfig:
    plan = [{"title": "T", "description": "wait for it", "assignee": "worker"}]
    script = ScriptedAdapter(
        lambda m, o: LLMResponse([TextBlock(json.dumps(plan) if len(m) == 1 else "final")])
    )
    return AgentConfig("lead", adapter=script)


TASKS = [Task("T", "wait for it", assignee="worker", id="t1")]


async def cancelled(start: Callable[[], Awaitable[TeamRunResult]], gate: Gate) -> None:
    """Start a run, cancel it once its tool call blocks, and see the cancellation go through."""
    run = asyncio.ensure_future(start())
    await asyncio.wait_for(gate.started.wait(), 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    # No wait here: the run/end landed before the cancellation went on, so a restore right
    # after numbers its events above it (an append still in flight took a seq it reused).


def ends(events: Sequence[JournalEvent], attempt: int) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == "run/end" and e.attempt == attempt]


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("how", ["run_tasks", "run_team"])
async def test_a_cancelled_run_ends_its_journal_with_run_end_aborted(
    durable: bool, how: str
) -> None:
    journal, store, gate = InMemoryRunJournal(), InMemoryStore(), Gate()
    options = JournalOptions(journal, durable=durable)
    checkpoint = CheckpointOptions(store=store, run_id="r1")

    def start() -> Awaitable[TeamRunResult]:
        oma = OpenMultiAgent()
        if how == "run_tasks":
            return oma.run_tasks(team(gate), TASKS, checkpoint=checkpoint, journal=options)
        return oma.run_team(
            team(gate), "goal", coordinator=lead(), checkpoint=checkpoint, journal=options
        )

    await cancelled(start, gate)
    events = await journal.read_from(0)
    assert ends(events, 1) == [
        {"status": {"code": "aborted"}, "error": {"message": "CancelledError"}}
    ]
    assert events[-1].type == "run/end"

    # The cancelled run restores from what it recorded and completes; the call ran once more
    # because it never returned (an idempotent tool, answered again).
    gate.release.set()
    result = await OpenMultiAgent().restore(
        team(gate), TASKS if how == "run_tasks" else None, checkpoint=checkpoint, journal=options,
        coordinator=lead(),
    )  # fmt: skip
    assert result.success
    events = await journal.read_from(0)
    assert ends(events, 2) == [{"status": {"code": "ok"}}]
    seqs = [event.seq for event in events]
    assert seqs == sorted(set(seqs)), "one event per seq, in order"


async def test_a_cancelled_run_without_a_checkpoint_ends_its_journal() -> None:
    journal, gate = InMemoryRunJournal(), Gate()
    options = JournalOptions(journal, durable=False)
    await cancelled(lambda: OpenMultiAgent().run_tasks(team(gate), TASKS, journal=options), gate)
    assert ends(await journal.read_from(0), 1)[0]["status"] == {"code": "aborted"}


@pytest.mark.parametrize("durable", [False, True])
async def test_a_cancelled_restore_ends_its_attempt_with_run_end_aborted(durable: bool) -> None:
    journal, store, gate = InMemoryRunJournal(), InMemoryStore(), Gate()
    options = JournalOptions(journal, durable=durable)
    checkpoint = CheckpointOptions(store=store, run_id="r1")
    await cancelled(
        lambda: OpenMultiAgent().run_tasks(
            team(gate), TASKS, checkpoint=checkpoint, journal=options
        ),
        gate,
    )
    gate.started.clear()
    await cancelled(
        lambda: OpenMultiAgent().restore(team(gate), TASKS, checkpoint=checkpoint, journal=options),
        gate,
    )
    events = await journal.read_from(0)
    assert [end["status"] for end in ends(events, 2)] == [{"code": "aborted"}]
    assert events[-1].type == "run/end"


async def test_an_attempt_records_one_run_end_whatever_ends_it_first() -> None:
    """A cancellation landing while a finished run's end is flushed adds no second ``run/end``."""
    journal = InMemoryRunJournal()
    journaling = await RunJournaling.open(
        JournalOptions(journal, durable=False), run_id="r1", attempt=1, emit=lambda event: None
    )
    await finish_journal(journaling, RunOutcome("ok"))
    journaling.abort(asyncio.CancelledError())
    await journaling.recorder.flush()
    assert [e.data for e in await journal.read_from(0)] == [{"status": {"code": "ok"}}]

"""A conversation that reaches ``max_turns`` ends normally, as in OMA v1.16.1.

OMA's runner (``agent/runner.ts``) leaves its loop at ``if (turns >= this.maxTurns) break``
and, "if the loop exited due to maxTurns", takes the text of the last assistant message as
its output (empty when that message had none); ``Agent.executeRun`` (``agent/agent.ts``) then
reports ``success`` with status ``ok``, and ``orchestrator/task-execution.ts`` completes the
task with that output (``queue.complete``, its shared-memory write, ``task_complete``): no
failure, no retry, no warning. The cases below hold it on every path: ``run_tasks`` (retries
configured), ``run_team``, a run restored at any durable boundary (the OMA snapshot form and
the durable journal alike), and the journal-first fold at every durable boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fold_check import fold_mismatch, saved_with_snapshot
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
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.run_writer import RunWriter
from oma_actors.events import ProgressEvent, TaskCompleted, TaskFailed, TaskRetry
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.orchestration.journal_setup import unsafe_tools
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

MAX_TURNS = 2


class Label(BaseModel):
    label: str


def _text(message: Message) -> str:
    return " ".join(b.text for b in message.content if isinstance(b, TextBlock))


def worker(*, silent_last: bool = False) -> tuple[AgentConfig, ScriptedAdapter]:
    """A worker whose ``loop`` task calls a tool on every turn; any other task answers.

    Each ``loop`` turn says ``step <n>`` beside its call (the last one says nothing with
    ``silent_last``); the ``report`` task answers with what its prompt says of ``loop``.
    """

    async def ledger(args: Label, ctx: ToolContext) -> str:
        return f"recorded {args.label}"

    tool = define_tool(name="ledger", description="d", input_model=Label, execute=ledger)

    def respond(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        prompt = _text(messages[0])
        if "# Task: loop" not in prompt:
            seen = "step 2" in prompt
            return LLMResponse([TextBlock(f"report (saw loop: {seen})")], usage=TokenUsage(1, 1))
        turn = sum(m.role == "assistant" for m in messages) + 1
        call = ToolUseBlock(f"loop-{turn}", "ledger", {"label": f"L{turn}"})
        said = [] if silent_last and turn == MAX_TURNS else [TextBlock(f"step {turn}")]
        return LLMResponse([*said, call], stop_reason="tool_use", usage=TokenUsage(2, 1))

    adapter = ScriptedAdapter(respond)
    config = AgentConfig("worker", adapter=adapter, tools=[tool], max_turns=MAX_TURNS)
    return config, adapter


def tasks() -> list[Task]:
    return [
        Task("loop", "keep calling the ledger", id="loop", assignee="worker", max_retries=2),
        Task("report", "report on loop", id="report", assignee="worker", depends_on=["loop"]),
    ]


def loop_calls(adapter: ScriptedAdapter) -> int:
    return sum("# Task: loop" in _text(call.messages[0]) for call in adapter.calls)


async def test_run_tasks_completes_a_task_stopped_at_max_turns_without_a_retry() -> None:
    config, adapter = worker()
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(
        Team("t", [config], shared_memory=True), tasks()
    )
    assert (result.success, result.status.code) == (True, "ok")
    assert [(t.id, t.status) for t in result.tasks] == [
        ("loop", "completed"),
        ("report", "completed"),
    ]
    stopped = result.task_results["loop"]
    assert (stopped.success, stopped.output, stopped.turns) == (True, "step 2", MAX_TURNS)
    assert len(stopped.tool_calls) == MAX_TURNS
    assert loop_calls(adapter) == MAX_TURNS  # max_retries=2, yet no further attempt
    assert not [e for e in events if isinstance(e, TaskRetry | TaskFailed)]
    completed = [e for e in events if isinstance(e, TaskCompleted) and e.task_id == "loop"]
    assert [e.result.output for e in completed] == ["step 2"]
    # The dependent task reads the output, as from any completed task.
    assert result.task_results["report"].output == "report (saw loop: True)"


async def test_a_silent_last_turn_completes_the_task_with_an_empty_output() -> None:
    config, _ = worker(silent_last=True)
    result = await OpenMultiAgent().run_tasks(Team("t", [config]), tasks())
    assert [t.status for t in result.tasks] == ["completed", "completed"]
    assert (result.task_results["loop"].success, result.task_results["loop"].output) == (True, "")


async def test_run_team_completes_a_worker_task_stopped_at_max_turns_and_synthesizes() -> None:
    config, adapter = worker()
    plan = [
        {"title": "loop", "description": "keep calling the ledger", "assignee": "worker"},
        {"title": "report", "description": "report", "assignee": "worker", "dependsOn": ["loop"]},
    ]

    def lead(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if "Break the goal below" in _text(messages[0]):
            return LLMResponse([TextBlock(json.dumps(plan))])
        return LLMResponse([TextBlock("final answer")])

    result = await OpenMultiAgent().run_team(
        Team("t", [config], shared_memory=True),
        "loop, then report",
        coordinator=AgentConfig("lead", adapter=ScriptedAdapter(lead)),
    )
    assert (result.success, result.status.code) == (True, "ok")
    assert [t.status for t in result.tasks] == ["completed", "completed"]
    looped = next(t for t in result.tasks if t.title == "loop")
    assert result.task_results[looped.id].output == "step 2"
    assert loop_calls(adapter) == MAX_TURNS
    assert result.agent_results["coordinator"].output == "final answer"


def outcome(result: TeamRunResult) -> tuple[Any, ...]:
    """What a restore must give as the fresh run did."""
    return (
        result.success,
        result.status.code,
        [(t.id, t.status) for t in result.tasks],
        {task: (r.success, r.output) for task, r in result.task_results.items()},
    )


@dataclass(frozen=True, slots=True)
class Restored:
    """A run cancelled after a durable save, then restored."""

    result: TeamRunResult | None  # ``None``: the run ended before the cancel
    asked_before: int  # model calls of ``loop`` in the cancelled attempt
    asked_after: int  # ... in the restored one
    saved: tuple[str, int] | None  # ``loop``'s saved phase and turns, if it was in flight


async def interrupted_then_restored(
    stop_after: int, durable: bool | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Restored:
    """Cancel the run after its ``stop_after``-th durable save, then restore it.

    ``durable``: ``None`` runs without a journal, else journaled (journal-first when ``True``).
    """
    store = InMemoryStore()
    path = str(tmp_path / f"run-{stop_after}-{durable}.jsonl")
    options = CheckpointOptions(store=store, run_id=f"max-turns-{stop_after}")
    saves = 0
    saved: list[tuple[str, int]] = []
    stopped = asyncio.Event()
    original = RunWriter.save_run

    async def counting(self: RunWriter, run: RunAtBoundary, **kw: Any) -> Any:
        nonlocal saves
        outcome = await original(self, run, **kw)
        if outcome.durable:
            saves += 1
            if saves == stop_after:
                # The run's state at this save (a journal-only save writes no snapshot).
                snapshot = await run.build()
                entry = [e.state for e in snapshot.in_flight if e.task_id == "loop"]
                saved.extend((state.phase, state.turns) for state in entry)
                stopped.set()
        return outcome

    monkeypatch.setattr(RunWriter, "save_run", counting)
    config, adapter = worker()

    def journal() -> JournalOptions | None:
        if durable is None:
            return None
        return JournalOptions(JsonlRunJournal(path, flush_interval_ms=0), durable=durable)

    first = journal()
    run = asyncio.ensure_future(
        OpenMultiAgent(max_concurrency=1).run_tasks(
            Team("t", [config]), tasks(), checkpoint=options, journal=first
        )
    )
    waiter = asyncio.ensure_future(stopped.wait())
    await asyncio.wait([run, waiter], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    ended = run.done() and not run.cancelled()
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    if first is not None:
        await first.journal.close()
    before = loop_calls(adapter)
    if ended:
        return Restored(result=None, asked_before=before, asked_after=0, saved=None)
    second = journal()
    try:
        restored = await OpenMultiAgent(max_concurrency=1).restore(
            Team("t", [config]), checkpoint=options, journal=second
        )
    finally:
        if second is not None:
            await second.journal.close()
    return Restored(
        result=restored,
        asked_before=before,
        asked_after=loop_calls(adapter) - before,
        saved=saved[0] if saved else None,
    )


@pytest.mark.parametrize("durable", [None, False, True], ids=["snapshot", "oma-journal", "d10"])
async def test_a_restore_at_any_durable_boundary_ends_as_the_fresh_run(
    durable: bool | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, _ = worker()
    fresh = await OpenMultiAgent(max_concurrency=1).run_tasks(Team("t", [config]), tasks())
    expected = outcome(fresh)
    stops_restored: list[tuple[str, int] | None] = []
    for stop_after in range(1, 40):
        restored = await interrupted_then_restored(stop_after, durable, tmp_path, monkeypatch)
        if restored.result is None:
            break
        assert outcome(restored.result) == expected, (stop_after, restored.saved)
        # Only a turn whose answer was not saved is asked again, so never past the limit.
        assert restored.asked_before + restored.asked_after <= MAX_TURNS + 1, stop_after
        if restored.saved is not None and restored.saved[1] == MAX_TURNS:
            # Saved at the last turn (its calls, its results or the stop itself): the restored
            # conversation stops again before any model call, with the same output.
            assert restored.asked_after == 0, (stop_after, restored.saved)
        stops_restored.append(restored.saved)
    # Both the last turn's results (awaiting the model at the limit) and the stop were saved
    # restore points; the fold of a journal-first tail gives the first form.
    assert ("awaiting_model", MAX_TURNS) in stops_restored, stops_restored
    assert ("completed", MAX_TURNS) in stops_restored, stops_restored


async def test_journal_first_every_durable_boundary_folds_back_to_the_saved_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No event says a conversation stopped at its limit (OMA has none): the fold of the tail
    # still shows it awaiting the model, so the stop's ``terminal`` boundary must compact
    # (``TurnLimitReached`` marks it uncarried). Journal-only there, this fails on in_flight.
    config, _ = worker()
    team = Team("t", [config])
    store = InMemoryStore()
    journal = JsonlRunJournal(str(tmp_path / "run.jsonl"), flush_interval_ms=0)
    run_id = "max-turns-fold"
    mismatches: list[str] = []
    modes: dict[str, list[bool]] = {}
    original = RunWriter.save_run

    async def save_then_fold(self: RunWriter, run: RunAtBoundary, **kw: Any) -> Any:
        before = self.journal_saves
        outcome, snapshot = await saved_with_snapshot(original, self, run, **kw)
        if not outcome.durable:
            return outcome
        boundary = kw.get("boundary", "?")
        modes.setdefault(boundary, []).append(self.journal_saves > before)
        found = await fold_mismatch(store, run_id, journal, snapshot, unsafe_tools(team))
        if found is not None:
            mismatches.append(f"{boundary}: {found}")
        return outcome

    monkeypatch.setattr(RunWriter, "save_run", save_then_fold)
    try:
        result = await OpenMultiAgent(max_concurrency=1).run_tasks(
            team,
            tasks(),
            checkpoint=CheckpointOptions(store=store, run_id=run_id),
            journal=JournalOptions(journal, durable=True),
        )
    finally:
        await journal.close()
    assert result.task_results["loop"].output == "step 2"
    assert not mismatches, mismatches
    assert True in modes.get("tool_results", []), modes  # per-turn saves went by the journal
    # The stop compacts; the report's final answer goes by the journal.
    assert modes.get("terminal") == [False, True], modes

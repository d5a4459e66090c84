"""How a run ended after its last snapshot: cancelled, interrupted, cancelled by its record.

A run's latest snapshot still says "in progress" once its attempt is cancelled (nothing saves
after a cancellation); the journal's ``run/end`` (status ``aborted``, its message) and the run
record say what happened. The timeline reads the run, its tasks and its calls as ``GetRun``
does: the run ``cancelled``, a task it left in progress ``failed`` with ``cancelled: <reason>``,
a call it had in flight ``outcome unknown`` (it may or may not have run). While the attempt is
live, a call of its open turn is ``running``, safe and unsafe alike.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel
from test_timeline_render import text_at

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
from oma_actors.approvals import Suspend, ToolCallRequest
from oma_actors.checkpoint import Checkpoint, fold_tail, tail_read_from
from oma_actors.journal import JsonlRunJournal
from oma_actors.llm import LLMResponse, ToolUseBlock
from oma_actors.runs import MemoryStoreRunStore, RunLedger, RunStoreOptions, RunSummary
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter
from oma_actors.timeline import Timeline, build_timeline
from oma_actors.timeline.model import STOPPING


class Query(BaseModel):
    q: str


def one_call_team(started: asyncio.Event, effect: str = "idempotent") -> Team:
    async def fetch(args: Query, ctx: ToolContext) -> str:
        started.set()
        await asyncio.Event().wait()  # a host that never answers
        return "never"

    tool = define_tool(name="fetch", description="Fetch.", input_model=Query, execute=fetch,
                       effect=effect)  # type: ignore[arg-type]  # fmt: skip
    adapter = ScriptedAdapter([
        LLMResponse([ToolUseBlock("call-f", "fetch", {"q": "x"})], stop_reason="tool_use",
                    usage=TokenUsage(1, 1)),
        LLMResponse([], usage=TokenUsage(1, 1)),
    ])  # fmt: skip
    return Team("t", [AgentConfig("w", adapter=adapter, tools=[tool])])


async def timeline_of(store: InMemoryStore, journal: JsonlRunJournal, run_id: str) -> Timeline:
    """As ``oma runs show`` and ``GetRunTimeline`` draw it: the snapshot with its tail folded."""
    snapshot = await Checkpoint(store, run_id=run_id).load_latest()
    assert snapshot is not None
    events = await journal.read_from(0)
    start = tail_read_from(snapshot)
    snapshot = fold_tail(snapshot, [e for e in events if e.seq >= start]).snapshot
    return build_timeline(snapshot, events)


@pytest.mark.parametrize("effect", ["idempotent", "unsafe"])
@pytest.mark.parametrize(
    ("message", "status", "task_status", "task_reason"),
    [
        ("operator stop", "cancelled", "failed", "cancelled: operator stop"),
        (STOPPING, "interrupted", "in_progress", "interrupted"),
    ],
)
async def test_a_call_running_when_its_attempt_is_cancelled_ends_outcome_unknown(
    tmp_path: Path, effect: str, message: str, status: str, task_status: str, task_reason: str
) -> None:
    started = asyncio.Event()
    store = InMemoryStore()
    journal = JsonlRunJournal(tmp_path / "journal.jsonl", flush_interval_ms=0)
    run: asyncio.Task[TeamRunResult] = asyncio.ensure_future(OpenMultiAgent().run_tasks(
        one_call_team(started, effect), [Task("x", "do x", id="t-x")],
        checkpoint=CheckpointOptions(store=store, run_id="run-c"), journal=journal,
    ))  # fmt: skip
    await asyncio.wait_for(started.wait(), 10)

    live = await timeline_of(store, journal, "run-c")
    [lane] = live.lanes
    [call] = live.calls
    assert (live.status, live.reason, lane.status, lane.reason) == (
        "in progress", None, "in_progress", None,
    )  # fmt: skip
    # Sent to its tool, no answer yet: running (a safe call's tool/call comes with its result).
    assert (call.mark, call.attempt) == ("running", 1)

    run.cancel(message)
    with pytest.raises(asyncio.CancelledError):
        await run
    ended = await timeline_of(store, journal, "run-c")
    await journal.close()
    [lane] = ended.lanes
    [call] = ended.calls
    assert (ended.status, ended.reason) == (status, message)
    assert (lane.status, lane.reason) == (task_status, task_reason)
    assert call.mark == "outcome unknown"
    text = text_at(80, ended)
    assert f"  {status}: {message[:20]}" in text
    assert f"({task_reason})" in text
    assert "? outcome unknown  fetch call-f" in text


def test_the_interrupted_message_is_the_sidecars() -> None:
    from sidecar.attempt import STOPPING as SIDECAR_STOPPING

    assert STOPPING == SIDECAR_STOPPING


async def test_a_suspended_run_an_operator_cancelled_reads_cancelled_by_its_record(
    tmp_path: Path,
) -> None:
    # Cancelled by its run record while no attempt ran: no run/end says so, the record does.
    store = InMemoryStore()
    runs = MemoryStoreRunStore(store)
    journal = JsonlRunJournal(tmp_path / "journal.jsonl", flush_interval_ms=0)

    def gate(call: ToolCallRequest) -> Suspend:
        return Suspend("review")

    result = await OpenMultiAgent(on_tool_call=gate).run_tasks(
        one_call_team(asyncio.Event()), [Task("x", "do x", id="t-x")],
        checkpoint=CheckpointOptions(store=store, run_id="run-s"), journal=journal,
        run_store=RunStoreOptions(runs, heartbeat=False),
    )  # fmt: skip
    assert result.status.code == "suspended"
    record = await RunLedger(runs).cancel("run-s", "operator stop")
    snapshot = await Checkpoint(store, run_id="run-s").load_latest()
    assert snapshot is not None
    events = await journal.read_from(0)
    await journal.close()
    start = tail_read_from(snapshot)
    snapshot = fold_tail(snapshot, [e for e in events if e.seq >= start]).snapshot

    before = build_timeline(snapshot, events)
    assert before.status == "suspended"
    timeline = build_timeline(snapshot, events, record=record)
    [lane] = timeline.lanes
    [call] = timeline.calls
    assert (timeline.status, timeline.reason) == ("cancelled", "operator stop")
    assert (lane.status, lane.reason) == ("failed", "cancelled: operator stop")
    assert call.mark == "awaiting approval"  # never decided: it never ran
    # ``oma runs show`` has the record's summary (no outcome message): cancelled all the same.
    summary = await RunLedger(runs).get("run-s")
    assert summary is not None
    shown = RunSummary.of(summary, run_id="run-s", now=summary.updated_at)
    assert build_timeline(snapshot, events, record=shown).status == "cancelled"

"""Restore across tool calls: committed results replay, uncommitted calls re-run (spec 10-12)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from acceptance_helpers import answer, calls, run_until, two_tasks
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.checkpoint import checkpoint_key
from oma_actors.events import ProgressEvent, TaskCompleted, ToolCalled
from oma_actors.llm import ToolResultBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


def effect_tool(
    log: list[str],
    name: str = "effect",
    *,
    unsafe: bool = False,
    cancel: Callable[[str], None] | None = None,
):  # type: ignore[no-untyped-def]
    class Args(BaseModel):
        label: str

    async def run(args: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(args, Args)
        log.append(f"{args.label}@{ctx.tool_call_id}")
        if cancel is not None:
            cancel(args.label)
        return f"committed:{args.label}"

    return define_tool(
        name=name,
        description="",
        input_model=Args,
        execute=run,
        effect="unsafe" if unsafe else "idempotent",
    )


async def test_t25_committed_tool_result_is_replayed_never_re_run() -> None:
    store = InMemoryStore()
    log: list[str] = []
    tool = effect_tool(log)
    script = [
        answer("first done"),
        calls(("call-B", "effect", {"label": "B"})),
        answer("second done"),
    ]
    adapter = ScriptedAdapter(script)
    team = Team(
        "t", [AgentConfig("worker", adapter=adapter, tools=[tool])], shared_memory_store=store
    )
    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe).run_tasks(
            team, two_tasks(), checkpoint=True
        ),
        lambda event: isinstance(event, ToolCalled) and not event.replayed,
    )
    assert log == ["B@call-B"]
    stored = json.loads((await store.get(checkpoint_key(None))).value)  # type: ignore[union-attr]
    [entry] = stored["inFlightTasks"]
    assert entry["turns"] == 1
    assert entry["tokenUsage"] == {"input_tokens": 1, "output_tokens": 1}
    assert "committed:B" in json.dumps(entry)
    assert entry["taskId"] in stored["queue"]["inProgress"]

    result = await OpenMultiAgent().restore(team)
    assert result.success
    assert log == ["B@call-B"]
    assert adapter.call_count == 3
    last_input = adapter.calls[2].messages[-1].content[0]
    assert isinstance(last_input, ToolResultBlock)
    assert last_input.content == "committed:B"
    second = result.tasks[1]
    # Both token counts continue from the saved in-flight usage (1/1) plus the resumed turn.
    assert result.task_results[second.id].token_usage == TokenUsage(2, 2)
    assert result.task_results[second.id].turns == 2


async def test_t26_uncommitted_call_re_runs_with_the_same_tool_call_id() -> None:
    store = InMemoryStore()
    log: list[str] = []
    holder: list[asyncio.Task[TeamRunResult]] = []
    crashed = False

    def crash_once(label: str) -> None:
        nonlocal crashed
        if not crashed:
            crashed = True
            holder[0].cancel()

    tool = effect_tool(log, cancel=crash_once)
    script = [
        answer("first done"),
        calls(("call-C", "effect", {"label": "C"})),
        answer("second done"),
    ]
    adapter = ScriptedAdapter(script)
    team = Team(
        "t", [AgentConfig("worker", adapter=adapter, tools=[tool])], shared_memory_store=store
    )
    holder.append(
        asyncio.ensure_future(OpenMultiAgent().run_tasks(team, two_tasks(), checkpoint=True))
    )
    with pytest.raises(asyncio.CancelledError):
        await holder[0]
    stored = json.loads((await store.get(checkpoint_key(None))).value)  # type: ignore[union-attr]
    [entry] = stored["inFlightTasks"]
    assert entry["phase"] == "executing_tools"
    assert "commit" not in entry["pendingToolCalls"][0]

    result = await OpenMultiAgent().restore(team)
    assert result.success
    assert log == ["C@call-C", "C@call-C"]  # re-run once, same id: the idempotency key holds
    assert adapter.call_count == 3


async def test_t28_parallel_siblings_commit_independently() -> None:
    store = InMemoryStore()
    log: list[str] = []

    class Args(BaseModel):
        label: str

    release = asyncio.Event()

    async def run(args: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(args, Args)
        if args.label == "Q" and not release.is_set():
            await asyncio.sleep(10)  # Q is still running when the run is interrupted
        log.append(args.label)
        return f"committed:{args.label}"

    tool = define_tool(name="effect", description="", input_model=Args, execute=run)
    script = [
        answer("first done"),
        calls(("call-P", "effect", {"label": "P"}), ("call-Q", "effect", {"label": "Q"})),
        answer("second done"),
    ]
    adapter = ScriptedAdapter(script)
    team = Team(
        "t", [AgentConfig("worker", adapter=adapter, tools=[tool])], shared_memory_store=store
    )
    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe).run_tasks(
            team, two_tasks(), checkpoint=True
        ),
        lambda event: isinstance(event, ToolCalled) and event.tool_call_id == "call-P",
    )
    stored = json.loads((await store.get(checkpoint_key(None))).value)  # type: ignore[union-attr]
    pending = stored["inFlightTasks"][0]["pendingToolCalls"]
    assert [("commit" in item) for item in pending] == [True, False]
    release.set()
    result = await OpenMultiAgent().restore(team)
    assert result.success
    assert log == ["P", "Q"]
    assert adapter.call_count == 3
    blocks = [b for b in adapter.calls[2].messages[-1].content if isinstance(b, ToolResultBlock)]
    assert [b.content for b in blocks] == ["committed:P", "committed:Q"]


async def test_d1_unsafe_call_dispatched_but_uncommitted_is_not_re_run() -> None:
    store = InMemoryStore()
    log: list[str] = []
    holder: list[asyncio.Task[TeamRunResult]] = []

    def crash(label: str) -> None:
        holder[0].cancel()

    tool = effect_tool(log, name="pay", unsafe=True, cancel=crash)
    script = [calls(("call-pay", "pay", {"label": "X"})), answer("done anyway")]
    adapter = ScriptedAdapter(script)
    team = Team(
        "t", [AgentConfig("worker", adapter=adapter, tools=[tool])], shared_memory_store=store
    )
    holder.append(
        asyncio.ensure_future(OpenMultiAgent().run_tasks(team, [Task("pay", "x")], checkpoint=True))
    )
    with pytest.raises(asyncio.CancelledError):
        await holder[0]
    stored = json.loads((await store.get(checkpoint_key(None))).value)  # type: ignore[union-attr]
    assert stored["inFlightTasks"][0]["pendingToolCalls"][0]["dispatched"] is True

    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).restore(team)
    assert result.success
    assert log == ["X@call-pay"]  # never twice
    sent = adapter.calls[1].messages[-1].content[0]
    assert isinstance(sent, ToolResultBlock)
    assert sent.is_error
    assert "TOOL_OUTCOME_UNKNOWN" in str(sent.content)
    assert [type(e).__name__ for e in events if type(e).__name__ == "ToolOutcomeUnknown"] == [
        "ToolOutcomeUnknown"
    ]


async def test_t24_t29_committed_effect_is_never_repeated_by_restores() -> None:
    store = InMemoryStore()
    log: list[str] = []
    tool = effect_tool(log)
    script = [calls(("call-A", "effect", {"label": "A"})), answer("first done"), answer("second")]
    adapter = ScriptedAdapter(script)
    team = Team(
        "t", [AgentConfig("worker", adapter=adapter, tools=[tool])], shared_memory_store=store
    )
    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe).run_tasks(
            team, two_tasks(), checkpoint=True
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    assert log == ["A@call-A"]
    result = await OpenMultiAgent().restore(team)
    assert result.success
    for _ in range(2):
        again = await OpenMultiAgent().restore(team)
        assert [task.status for task in again.tasks] == ["completed", "completed"]
    assert log == ["A@call-A"]
    assert adapter.call_count == 3

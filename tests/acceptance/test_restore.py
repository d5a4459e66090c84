"""Checkpoint and restore through the public API (spec sections 8-12, 18.2, 18.3)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
from acceptance_helpers import answer, calls
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    ChatOptions,
    CheckpointOptions,
    CheckpointSaveFailed,
    ConfigurationError,
    FileStore,
    InMemoryStore,
    LLMResponse,
    Message,
    OpenMultiAgent,
    ProgressEvent,
    RunIdMismatchError,
    Task,
    TaskCompleted,
    Team,
    TeamRunResult,
    ToolCalled,
    ToolContext,
    ToolResultBlock,
    define_tool,
)
from oma_actors.checkpoint import Checkpoint, checkpoint_key
from oma_actors.testing import ScriptedAdapter

FIXTURE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "oma" / "task-boundary"


def titled(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    first = messages[0].content[0]
    title = getattr(first, "text", "").splitlines()[0].removeprefix("# Task: ")
    return answer(f"{title} output")


def two_tasks() -> list[Task]:
    return [
        Task("first", "do first", assignee="worker"),
        Task("second", "do second", assignee="worker", depends_on=["first"]),
    ]


async def run_until(
    start: Callable[[Callable[[ProgressEvent], None]], Awaitable[TeamRunResult]],
    stop_when: Callable[[ProgressEvent], bool],
) -> None:
    """Run until ``stop_when`` sees an event, then cancel the run (an abort, not a crash)."""
    holder: list[asyncio.Task[TeamRunResult]] = []

    def observe(event: ProgressEvent) -> None:
        if stop_when(event):
            holder[0].cancel()

    holder.append(asyncio.ensure_future(start(observe)))
    with pytest.raises(asyncio.CancelledError):
        await holder[0]


async def test_t09_no_checkpoint_option_writes_no_checkpoint() -> None:
    store = InMemoryStore()
    team = Team(
        "t", [AgentConfig("worker", adapter=ScriptedAdapter(titled))], shared_memory_store=store
    )
    await OpenMultiAgent().run_tasks(team, two_tasks())
    assert not [
        entry.key for entry in await store.list() if entry.key.startswith("__oma_checkpoint__/")
    ]


async def test_t10_t17_abort_after_first_then_restore_with_separate_store() -> None:
    shared, cp_store = InMemoryStore(), InMemoryStore()
    await shared.set(
        "seed/note",
        json.dumps({"keep": True}),
        {"agent": "seed", "sharedMemoryValueEncoding": "json"},
    )
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)], shared_memory_store=shared)
    options = CheckpointOptions(store=cp_store, run_id="run-10")

    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe).run_tasks(
            team, two_tasks(), checkpoint=options
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    assert adapter.call_count == 1
    stored = json.loads((await cp_store.get(checkpoint_key("run-10"))).value)  # type: ignore[union-attr]
    assert stored["version"] == 4
    assert "seed/note" in [entry["key"] for entry in stored["sharedMemory"]["entries"]]

    for entry in await shared.list():
        await shared.delete(entry.key)
    fresh = Team("t", [AgentConfig("worker", adapter=adapter)], shared_memory_store=shared)
    result = await OpenMultiAgent().restore(fresh, checkpoint=options)
    assert adapter.call_count == 2
    assert "first output" in adapter.calls[1].prompt
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    assert (await shared.get("seed/note")).value == '{"keep": true}'  # type: ignore[union-attr]
    assert result.run_id == "run-10"
    assert result.attempt == 2
    assert result.token_usage.output_tokens == 2  # the restored first result counts (OR-09)


async def test_t12_restore_on_an_empty_store_runs_the_given_tasks() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    result = await OpenMultiAgent().restore(
        team, [Task("only", "x")], checkpoint=CheckpointOptions(store=store, run_id="r12")
    )
    assert result.success
    assert adapter.call_count == 1
    assert await store.get(checkpoint_key("r12")) is not None


async def test_d7_restore_with_nothing_writes_nothing() -> None:
    store = InMemoryStore()
    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter(titled))])
    result = await OpenMultiAgent().restore(
        team, checkpoint=CheckpointOptions(store=store, run_id="r")
    )
    assert result.tasks == []
    assert await store.list() == []


async def test_t15_t29_finished_run_restores_without_model_calls_and_attempt_grows() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)], shared_memory_store=store)
    first = await OpenMultiAgent().run_tasks(team, two_tasks(), checkpoint=True)
    assert first.success
    again = await OpenMultiAgent().restore(team)
    third = await OpenMultiAgent().restore(team)
    assert adapter.call_count == 2
    assert [task.status for task in third.tasks] == ["completed", "completed"]
    assert (again.attempt, third.attempt) == (2, 3)
    assert third.task_results[first.tasks[1].id].output == "second output"


async def test_t16_reused_store_persists_only_the_turn_count() -> None:
    store = InMemoryStore()
    await store.set_with_expiry("seed/ttl", "keep", 5, {"agent": "seed"})
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)], shared_memory_store=store)
    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe).run_tasks(
            team, two_tasks(), checkpoint=True
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    stored = json.loads((await store.get(checkpoint_key(None))).value)  # type: ignore[union-attr]
    assert "sharedMemory" not in stored
    assert stored["turnCount"] == 1
    result = await OpenMultiAgent().restore(team)
    assert result.success
    after = json.loads((await store.get(checkpoint_key(None))).value)  # type: ignore[union-attr]
    assert after["turnCount"] == 2
    assert (await store.get("seed/ttl")) is not None


async def test_t19_failing_store_never_fails_the_run() -> None:
    class Broken(InMemoryStore):
        attempts = 0

        async def set(self, key: str, value: str, metadata: object = None) -> None:  # type: ignore[override]
            Broken.attempts += 1
            raise OSError("disk on fire")

    events: list[ProgressEvent] = []
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(
        team, two_tasks(), checkpoint=CheckpointOptions(store=Broken(), run_id="r19")
    )
    assert result.success
    assert adapter.call_count == 2
    assert Broken.attempts >= 2
    failures = [event for event in events if isinstance(event, CheckpointSaveFailed)]
    assert failures
    assert "disk on fire" in failures[0].error


async def test_t20_checkpoint_without_a_store_or_run_id_is_refused_before_work() -> None:
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    with pytest.raises(ConfigurationError, match="run_id"):
        await OpenMultiAgent().run_tasks(team, two_tasks(), checkpoint=True)
    assert adapter.call_count == 0


async def test_t21_instance_fallback_store_with_a_run_id() -> None:
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    orchestrator_events: list[Callable[[ProgressEvent], None]] = []
    holder: list[asyncio.Task[TeamRunResult]] = []

    def observe(event: ProgressEvent) -> None:
        for hook in orchestrator_events:
            hook(event)

    orch = OpenMultiAgent(on_progress=observe)
    orchestrator_events.append(
        lambda event: holder[0].cancel() if isinstance(event, TaskCompleted) else None
    )
    holder.append(
        asyncio.ensure_future(
            orch.run_tasks(team, two_tasks(), checkpoint=CheckpointOptions(run_id="run-1"))
        )
    )
    with pytest.raises(asyncio.CancelledError):
        await holder[0]
    orchestrator_events.clear()
    result = await orch.restore(team, checkpoint=CheckpointOptions(run_id="run-1"))
    assert adapter.call_count == 2
    assert result.success


async def test_run_id_conflict_is_refused_before_any_work() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    await OpenMultiAgent().run_tasks(
        team, two_tasks(), checkpoint=CheckpointOptions(store=store, key="k", run_id="a")
    )
    with pytest.raises(RunIdMismatchError):
        await OpenMultiAgent().restore(
            team, checkpoint=CheckpointOptions(store=store, key="k", run_id="b")
        )
    assert adapter.call_count == 2


async def test_d9_two_live_runs_on_one_key_are_refused() -> None:
    store = InMemoryStore()
    gate = asyncio.Event()

    class Waiting:
        async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
            await gate.wait()
            return answer("ok")

    team = Team("t", [AgentConfig("worker", adapter=Waiting())])
    options = CheckpointOptions(store=store, run_id="same")
    first = asyncio.ensure_future(
        OpenMultiAgent().run_tasks(team, [Task("a", "x")], checkpoint=options)
    )
    await asyncio.sleep(0.01)
    with pytest.raises(ConfigurationError, match="already in use"):
        await OpenMultiAgent().run_tasks(team, [Task("b", "y")], checkpoint=options)
    gate.set()
    assert (await first).success


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
    assert result.task_results[second.id].token_usage.output_tokens == 2
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


async def test_typescript_oma_checkpoint_restores_here(tmp_path: Path) -> None:
    shutil.copy(FIXTURE / "store.json", tmp_path / "store.json")
    scenario = json.loads((FIXTURE / "scenario.json").read_text())
    assert scenario["runId"] == "fixture-task-boundary"
    adapter = ScriptedAdapter(titled)
    shared = InMemoryStore()
    team = Team(
        "fixture-team", [AgentConfig("worker", adapter=adapter)], shared_memory_store=shared
    )
    store = FileStore(tmp_path / "store.json")
    result = await OpenMultiAgent().restore(
        team, checkpoint=CheckpointOptions(store=store, run_id="fixture-task-boundary")
    )
    assert adapter.call_count == 1
    assert "first output" in adapter.calls[0].prompt
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    note = await shared.get("seed/note")
    assert note is not None
    assert json.loads(note.value) == {"keep": True}
    assert result.attempt == 2
    saved = await Checkpoint(store, run_id="fixture-task-boundary").load_latest()
    assert saved is not None
    assert saved.attempt == 2
    assert saved.version == 4


def v1_team_snapshot(first_id: str, second_id: str) -> str:
    """A v1 runTeam snapshot as OMA wrote them: first completed, second pending, a goal."""
    task = {"createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z"}
    return json.dumps(
        {
            "version": 1,
            "mode": "runTeam",
            "runId": "team-run",
            "createdAt": "2026-01-01T00:00:00.000Z",
            "goal": "explain checkpoints",
            "queue": {
                "version": 1,
                "tasks": [
                    {**task, "id": first_id, "title": "first", "description": "do first",
                     "status": "completed", "assignee": "worker", "result": "first output"},
                    {**task, "id": second_id, "title": "second", "description": "do second",
                     "status": "pending", "assignee": "worker", "dependsOn": [first_id]},
                ],
                "pending": [second_id], "inProgress": [], "completed": [first_id],
                "failed": [], "blocked": [], "skipped": [],
            },
            "completedTaskResults": [{"taskId": first_id, "assignee": "worker", "result": "first output"}],
        }
    )  # fmt: skip


async def test_t22_restored_run_team_re_runs_only_the_synthesis() -> None:
    store = InMemoryStore()
    await store.set(checkpoint_key("team-run"), v1_team_snapshot("t1", "t2"))
    workers = ScriptedAdapter(titled)
    synth = ScriptedAdapter([answer("SYNTHESIZED ANSWER")])
    team = Team("t", [AgentConfig("worker", adapter=workers)])
    result = await OpenMultiAgent().restore(
        team,
        checkpoint=CheckpointOptions(store=store, run_id="team-run"),
        coordinator=AgentConfig("coordinator", adapter=synth),
    )
    assert (workers.call_count, synth.call_count) == (1, 1)
    assert "## Original Goal\nexplain checkpoints" in synth.calls[0].prompt
    assert result.agent_results["coordinator"].output == "SYNTHESIZED ANSWER"
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    assert result.attempt == 2  # v1 counts as attempt 1 (spec CK-07)
    # Decision D4: the synthesis is persisted, so a restore of the finished run calls nothing.
    again = await OpenMultiAgent().restore(
        team, checkpoint=CheckpointOptions(store=store, run_id="team-run")
    )
    assert again.agent_results["coordinator"].output == "SYNTHESIZED ANSWER"
    assert (workers.call_count, synth.call_count) == (1, 1)


async def test_t23_failed_restore_synthesis_keeps_the_task_outputs() -> None:
    store = InMemoryStore()
    await store.set(checkpoint_key("team-run"), v1_team_snapshot("t1", "t2"))

    class Broken:
        async def chat(self, messages: object, options: object) -> object:
            raise RuntimeError("coordinator down")

    events: list[ProgressEvent] = []
    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter(titled))])
    result = await OpenMultiAgent(on_progress=events.append).restore(
        team,
        checkpoint=CheckpointOptions(store=store, run_id="team-run"),
        coordinator=AgentConfig("coordinator", adapter=Broken()),  # type: ignore[arg-type]
    )
    assert "coordinator" not in result.agent_results
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    assert [type(e).__name__ for e in events if type(e).__name__ == "SynthesisFailed"]
    assert not result.success


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

"""Checkpoint and restore through the public API: lifecycle and options (spec 8-12, 18.2, 18.3)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence

import pytest
from acceptance_helpers import answer, run_until, titled, two_tasks

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    ConfigurationError,
    OpenMultiAgent,
    PlanArtifact,
    PlanTask,
    Task,
    Team,
    TeamRunResult,
)
from oma_actors.checkpoint import checkpoint_key
from oma_actors.errors import CheckpointNotFoundError, RunIdMismatchError
from oma_actors.events import CheckpointSaveFailed, ProgressEvent, TaskCompleted
from oma_actors.llm import ChatOptions, LLMResponse, Message
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FailingStore, ScriptedAdapter


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


async def test_restore_on_an_empty_store_runs_the_given_plan_as_a_plan() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    plan = PlanArtifact(
        [PlanTask("p1", "first", "do first", assignee="worker"),
         PlanTask("p2", "second", "do second", assignee="worker", depends_on=["p1"])],
        goal="the goal",
    )  # fmt: skip
    result = await OpenMultiAgent().restore(
        team, plan, checkpoint=CheckpointOptions(store=store, run_id="r-plan")
    )
    assert result.success
    assert [task.id for task in result.tasks] == ["p1", "p2"]  # the plan's own ids
    entry = await store.get(checkpoint_key("r-plan"))
    assert entry is not None
    saved = json.loads(entry.value)
    assert (saved["mode"], saved["goal"]) == ("runFromPlan", "the goal")


async def test_d12_restore_with_nothing_raises_and_writes_nothing() -> None:
    # D7 made this a silent no-op; D12 makes it an error the caller sees, still writing nothing.
    store = InMemoryStore()
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    with pytest.raises(CheckpointNotFoundError) as caught:
        await OpenMultiAgent().restore(team, checkpoint=CheckpointOptions(store=store, run_id="r"))
    assert caught.value.key == "__oma_checkpoint__/r/latest"
    assert await store.list() == []
    assert adapter.call_count == 0


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
    broken = FailingStore(InMemoryStore(), times=None, exc_factory=lambda: OSError("disk on fire"))
    events: list[ProgressEvent] = []
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(
        team, two_tasks(), checkpoint=CheckpointOptions(store=broken, run_id="r19")
    )
    assert result.success
    assert adapter.call_count == 2
    assert broken.fired >= 2  # every checkpoint save was attempted, and failed
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


async def test_a_restore_announces_only_the_completions_not_announced_before() -> None:
    # Events are at least once: a completion is saved before it is announced, and the
    # announcement is saved with the next snapshot. The last completion of a run has no next
    # snapshot, so a restore of the finished run announces it (and only it) again.
    store = InMemoryStore()
    adapter = ScriptedAdapter(titled)
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    options = CheckpointOptions(store=store, run_id="ann")
    first = await OpenMultiAgent().run_tasks(team, two_tasks(), checkpoint=options)
    ids = [task.id for task in first.tasks]
    seen: list[ProgressEvent] = []
    await OpenMultiAgent(on_progress=seen.append).restore(team, checkpoint=options)
    assert [e.task_id for e in seen if isinstance(e, TaskCompleted)] == [ids[1]]
    entry = await store.get(checkpoint_key("ann"))
    assert entry is not None
    stored = json.loads(entry.value)
    assert sorted(stored["announcedTaskIds"]) == sorted(ids)  # the restore saved its announcement
    seen.clear()
    await OpenMultiAgent(on_progress=seen.append).restore(team, checkpoint=options)
    assert [e for e in seen if isinstance(e, TaskCompleted)] == []
    assert adapter.call_count == 2  # no task ran again

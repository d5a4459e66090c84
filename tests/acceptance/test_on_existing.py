"""No silent overwrite (decision D12): on_existing, RunExistsError, list_checkpoints."""

from __future__ import annotations

import json

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
)
from oma_actors.approvals import Suspend
from oma_actors.checkpoint import Checkpoint, list_checkpoints
from oma_actors.errors import LLMError, RunExistsError
from oma_actors.events import TaskCompleted
from oma_actors.llm import LLMResponse
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


def team(adapter: ScriptedAdapter) -> Team:
    return Team("t", [AgentConfig("worker", adapter=adapter)])


async def interrupted(store: InMemoryStore, run_id: str = "r") -> ScriptedAdapter:
    """A run aborted after its first task completed: an unfinished snapshot is stored."""
    adapter = ScriptedAdapter(titled)
    options = CheckpointOptions(store=store, run_id=run_id)
    await run_until(
        lambda emit: OpenMultiAgent(on_progress=emit).run_tasks(
            team(adapter), two_tasks(), checkpoint=options
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    return adapter


async def test_a_fresh_run_on_an_unfinished_run_is_refused_before_any_work() -> None:
    store = InMemoryStore()
    await interrupted(store)
    before = await Checkpoint(store, run_id="r").load_latest()
    assert before is not None
    assert before.status == "in_progress"
    fresh = ScriptedAdapter(titled)
    with pytest.raises(RunExistsError) as caught:
        await OpenMultiAgent().run_tasks(
            team(fresh), two_tasks(), checkpoint=CheckpointOptions(store=store, run_id="r")
        )
    assert (caught.value.run_id, caught.value.status) == ("r", "in_progress")
    assert "on_existing" in str(caught.value)
    assert fresh.call_count == 0
    assert await Checkpoint(store, run_id="r").load_latest() == before


async def test_on_existing_restore_continues_the_stored_run() -> None:
    store = InMemoryStore()
    await interrupted(store)
    adapter = ScriptedAdapter(titled)
    result = await OpenMultiAgent().run_tasks(
        team(adapter), two_tasks(), checkpoint=CheckpointOptions(store=store, run_id="r"),
        on_existing="restore",
    )  # fmt: skip
    assert result.success
    assert result.attempt == 2
    assert adapter.call_count == 1  # only the second task ran


async def test_on_existing_overwrite_starts_over_at_attempt_one() -> None:
    store = InMemoryStore()
    await interrupted(store)
    adapter = ScriptedAdapter(titled)
    result = await OpenMultiAgent().run_tasks(
        team(adapter), [Task("only", "x")], checkpoint=CheckpointOptions(store=store, run_id="r"),
        on_existing="overwrite",
    )  # fmt: skip
    assert (result.success, result.attempt, adapter.call_count) == (True, 1, 1)
    stored = await Checkpoint(store, run_id="r").load_latest()
    assert stored is not None
    assert [t.title for t in stored.tasks] == ["only"]


async def test_a_finished_run_is_simply_replaced() -> None:
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="r")
    await OpenMultiAgent().run_tasks(team(ScriptedAdapter(titled)), two_tasks(), checkpoint=options)
    again = await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(titled)), [Task("next", "x")], checkpoint=options
    )
    assert again.success
    assert again.attempt == 1


async def test_a_suspended_run_counts_as_unfinished() -> None:
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="r")
    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
        team(ScriptedAdapter([answer("x")])), [Task("a", "x")], checkpoint=options
    )
    assert first.status.code == "suspended"
    with pytest.raises(RunExistsError) as caught:
        await OpenMultiAgent().run_tasks(
            team(ScriptedAdapter([answer("x")])), [Task("a", "x")], checkpoint=options
        )
    assert caught.value.status == "suspended"


async def test_an_unknown_on_existing_value_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="on_existing"):
        await OpenMultiAgent().run_tasks(
            team(ScriptedAdapter(titled)), two_tasks(), checkpoint=False,
            on_existing="replace",  # type: ignore[arg-type]
        )  # fmt: skip


async def test_list_checkpoints_shows_every_run_and_the_unreadable_ones() -> None:
    store = InMemoryStore()
    await interrupted(store, "a")
    await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(titled)),
        two_tasks(),
        checkpoint=CheckpointOptions(store=store, run_id="b"),
    )
    await store.set("__oma_checkpoint__/broken/latest", "{not json")
    await store.set("agent/notes", "not a checkpoint")
    summaries = await list_checkpoints(store)
    by_key = {s.key: s for s in summaries}
    assert set(by_key) == {
        "__oma_checkpoint__/a/latest", "__oma_checkpoint__/b/latest",
        "__oma_checkpoint__/broken/latest",
    }  # fmt: skip
    a, b = by_key["__oma_checkpoint__/a/latest"], by_key["__oma_checkpoint__/b/latest"]
    assert (a.run_id, a.status, a.attempt) == ("a", "in_progress", 1)
    assert (b.run_id, b.status) == ("b", "completed")
    assert b.revision > 0
    assert b.saved_at.endswith("Z")
    broken = by_key["__oma_checkpoint__/broken/latest"]
    assert broken.status == "unreadable"
    assert broken.error


async def test_on_existing_restore_continues_a_stored_plan_run() -> None:
    # run_from_plan decides on_existing as run_tasks does: the stored run goes on, the plan
    # given again is not run afresh over it.
    store = InMemoryStore()
    plan = PlanArtifact(
        [
            PlanTask("p1", "first", "do first", assignee="worker"),
            PlanTask("p2", "second", "do second", assignee="worker", depends_on=["p1"]),
        ],
        goal="g",
    )
    options = CheckpointOptions(store=store, run_id="r")
    await run_until(
        lambda emit: OpenMultiAgent(on_progress=emit).run_from_plan(
            team(ScriptedAdapter(titled)), plan, checkpoint=options
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    adapter = ScriptedAdapter(titled)
    result = await OpenMultiAgent().run_from_plan(
        team(adapter), plan, checkpoint=options, on_existing="restore"
    )
    assert (result.success, result.attempt, adapter.call_count) == (True, 2, 1)
    assert [task.id for task in result.tasks] == ["p1", "p2"]


async def test_on_existing_restore_continues_a_stored_team_run_without_planning_again() -> None:
    store = InMemoryStore()
    plan = [
        {"title": "first", "description": "do first", "assignee": "worker"},
        {"title": "second", "description": "do second", "assignee": "worker",
         "dependsOn": ["first"]},
    ]  # fmt: skip
    options = CheckpointOptions(store=store, run_id="r")
    planner = ScriptedAdapter([answer(json.dumps(plan)), answer("never")])
    await run_until(
        lambda emit: OpenMultiAgent(on_progress=emit).run_team(
            team(ScriptedAdapter(titled)),
            "goal",
            checkpoint=options,
            coordinator=AgentConfig("coordinator", adapter=planner),
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    lead = ScriptedAdapter([answer("the synthesis")])
    adapter = ScriptedAdapter(titled)
    result = await OpenMultiAgent().run_team(
        team(adapter), "goal", checkpoint=options, on_existing="restore",
        coordinator=AgentConfig("coordinator", adapter=lead),
    )  # fmt: skip
    assert (result.success, result.attempt, adapter.call_count) == (True, 2, 1)
    assert lead.call_count == 1  # the synthesis only: the stored plan was not asked for again
    assert result.agent_results["coordinator"].output == "the synthesis"


async def test_a_failed_run_is_finished_and_a_new_run_may_take_its_key() -> None:
    # Every task ended, not all completed (b's completion saved a's failure, SV-02): the
    # snapshot is "failed", not "in_progress", so on_existing="error" does not hold the key
    # for a restore that has nothing left to continue.
    def broken(messages: object, options: object) -> LLMResponse:
        raise LLMError("scripted", "model exploded")

    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="r")
    squad = Team(
        "t",
        [
            AgentConfig("bad", adapter=ScriptedAdapter(broken)),
            AgentConfig("good", adapter=ScriptedAdapter(titled, delay=0.05)),
        ],
    )
    tasks = [Task("a", "x", assignee="bad"), Task("b", "y", assignee="good")]
    first = await OpenMultiAgent().run_tasks(squad, tasks, checkpoint=options)
    assert [task.status for task in first.tasks] == ["failed", "completed"]
    stored = await Checkpoint(store, run_id="r").load_latest()
    assert stored is not None
    assert (stored.status, stored.is_unfinished) == ("failed", False)
    [summary] = await list_checkpoints(store)
    assert summary.status == "failed"
    again = await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(titled)), [Task("c", "z")], checkpoint=options
    )
    assert (again.success, again.attempt) == (True, 1)

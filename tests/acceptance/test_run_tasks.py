"""run_tasks and run_from_plan end to end through the public API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
from acceptance_helpers import answer, calls
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    PlanArtifact,
    PlanTask,
    Task,
    TaskGraphError,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.errors import AuthenticationError, OverloadedError
from oma_actors.events import (
    CheckpointSaved,
    ProgressEvent,
    RunFinished,
    TaskCompleted,
    TaskFailed,
    TaskRetry,
    TaskStarted,
)
from oma_actors.llm import ChatOptions, LLMResponse, Message, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import RecordingStore, ScriptedAdapter


def echo_brain(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    first = messages[0].content[0]
    title = getattr(first, "text", "").splitlines()[0].removeprefix("# Task: ")
    return answer(f"{title} output")


async def test_dependency_outputs_flow_into_dependent_prompts_and_shared_memory() -> None:
    adapter = ScriptedAdapter(echo_brain)
    store = InMemoryStore()
    team = Team("t", [AgentConfig("worker", adapter=adapter)], shared_memory_store=store)
    first = Task("first", "do first", assignee="worker")
    second = Task("second", "do second", assignee="worker", depends_on=["first"])
    result = await OpenMultiAgent().run_tasks(team, [first, second])

    assert result.success
    assert result.status.code == "ok"
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    assert adapter.call_count == 2
    assert "first output" in adapter.calls[1].prompt
    assert "### first (by worker)" in adapter.calls[1].prompt
    assert result.task_results[second.id].output == "second output"
    entry = await store.get(f"worker/task:{first.id}:result")
    assert entry is not None
    assert entry.value == "first output"
    assert entry.metadata == {"agent": "worker"}
    assert (result.token_usage.input_tokens, result.token_usage.output_tokens) == (2, 2)
    # One merged entry per agent, as OMA's buildTeamRunResult (orchestrator.ts 3283-3302).
    assert result.agent_results["worker"].output == "first output\n\n---\n\nsecond output"
    assert result.attempt == 1
    assert result.run_id


async def test_max_concurrency_bounds_tasks_in_flight() -> None:
    in_flight = 0
    peak = 0

    class Slow:
        async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.02)
            in_flight -= 1
            return answer("ok")

    team = Team("t", [AgentConfig("a", adapter=Slow()), AgentConfig("b", adapter=Slow())])
    tasks = [Task(f"t{i}", "x") for i in range(7)]
    result = await OpenMultiAgent(max_concurrency=3).run_tasks(team, tasks)
    assert result.success
    assert peak == 3
    # Unassigned tasks were spread over the roster.
    assert {task.assignee for task in result.tasks} == {"a", "b"}


async def test_failure_cascades_and_independent_tasks_still_run() -> None:
    class Broken:
        async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
            raise ValueError("model exploded")

    good = ScriptedAdapter(echo_brain)
    team = Team("t", [AgentConfig("bad", adapter=Broken()), AgentConfig("good", adapter=good)])
    a = Task("a", "x", assignee="bad")
    b = Task("b", "x", assignee="good", depends_on=["a"])
    c = Task("c", "x", assignee="good")
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(team, [a, b, c])
    assert not result.success
    assert result.status.code == "error"
    assert "'a'" in (result.status.message or "")
    assert {task.title: task.status for task in result.tasks} == {
        "a": "failed",
        "b": "failed",
        "c": "completed",
    }
    assert "model exploded" in (result.tasks[0].result or "")
    failed = [event for event in events if isinstance(event, TaskFailed)]
    assert [event.task_id for event in failed] == [a.id, b.id]
    assert good.call_count == 1


class Flaky:
    """A model that plays ``replies`` in order, raising those that are errors."""

    def __init__(self, *replies: LLMResponse | Exception) -> None:
        self.replies = list(replies)
        self.calls = 0

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        self.calls += 1
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


OVERLOADED = OverloadedError("anthropic", "overloaded", status=529)


async def test_retryable_failure_is_retried_with_usage_summed() -> None:
    flaky = Flaky(OVERLOADED, answer("fine", usage=(3, 4)))
    team = Team("t", [AgentConfig("w", adapter=flaky)])
    task = Task("a", "x", max_retries=2, retry_delay_ms=1)
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(team, [task])
    assert result.success
    assert flaky.calls == 2
    retries = [event for event in events if isinstance(event, TaskRetry)]
    assert len(retries) == 1
    assert (retries[0].attempt, retries[0].max_attempts) == (1, 3)
    assert result.task_results[task.id].token_usage.output_tokens == 4


async def test_tool_context_carries_run_and_task_ids() -> None:
    seen: list[ToolContext] = []

    class Arg(BaseModel):
        x: int

    async def record(args: BaseModel, ctx: ToolContext) -> str:
        seen.append(ctx)
        return "ok"

    tool = define_tool(name="rec", description="", input_model=Arg, execute=record)
    adapter = ScriptedAdapter([calls(("call_1", "rec", {"x": 1})), answer("done")])
    team = Team("t", [AgentConfig("w", adapter=adapter, tools=[tool])])
    task = Task("a", "x")
    result = await OpenMultiAgent().run_tasks(team, [task])
    assert len(seen) == 1
    assert (seen[0].run_id, seen[0].task_id, seen[0].tool_call_id) == (
        result.run_id,
        task.id,
        "call_1",
    )
    assert seen[0].agent_name == "w"


async def test_events_pair_and_a_raising_observer_breaks_nothing() -> None:
    seen: list[ProgressEvent] = []

    def observer(event: ProgressEvent) -> None:
        seen.append(event)
        raise RuntimeError("observer bug")

    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(echo_brain))])
    tasks = [Task("a", "x"), Task("b", "y", depends_on=["a"])]
    result = await OpenMultiAgent(on_progress=observer).run_tasks(team, tasks)
    assert result.success
    kinds = [
        type(event).__name__ for event in seen if isinstance(event, TaskStarted | TaskCompleted)
    ]
    assert kinds == ["TaskStarted", "TaskCompleted", "TaskStarted", "TaskCompleted"]


async def test_invalid_graph_fails_before_any_model_call() -> None:
    adapter = ScriptedAdapter(echo_brain)
    team = Team("t", [AgentConfig("w", adapter=adapter)])
    with pytest.raises(TaskGraphError, match="unknown task 'ghost'"):
        await OpenMultiAgent().run_tasks(team, [Task("a", "x", depends_on=["ghost"])])
    with pytest.raises(TaskGraphError, match="unknown assignee"):
        await OpenMultiAgent().run_tasks(team, [Task("a", "x", assignee="nobody")])
    assert adapter.call_count == 0


async def test_run_from_plan_uses_ids_exactly() -> None:
    adapter = ScriptedAdapter(echo_brain)
    team = Team("t", [AgentConfig("w", adapter=adapter)])
    plan = PlanArtifact(
        [
            PlanTask("p1", "first", "do first", assignee="w"),
            PlanTask("p2", "second", "do second", assignee="w", depends_on=["p1"]),
        ],
        goal="g",
    )
    result = await OpenMultiAgent().run_from_plan(team, plan)
    assert result.success
    assert [task.id for task in result.tasks] == ["p1", "p2"]
    assert "first output" in adapter.calls[1].prompt
    assert "coordinator" not in result.agent_results


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (
            PlanArtifact([PlanTask("p", "t", "d")], version=2),
            "Unsupported plan artifact version: 2",
        ),
        (PlanArtifact([PlanTask("p", "t", "d", depends_on=["x"])]), "unknown id"),
        (
            PlanArtifact(
                [
                    PlanTask("p", "t", "d", depends_on=["q"]),
                    PlanTask("q", "u", "d", depends_on=["p"]),
                ]
            ),
            "cycle",
        ),
        (PlanArtifact([PlanTask("p", "t", "  ")]), "no description"),
    ],
)
async def test_invalid_plans_are_refused(plan: PlanArtifact, message: str) -> None:
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(echo_brain))])
    with pytest.raises(TaskGraphError, match=message):
        await OpenMultiAgent().run_from_plan(team, plan)


async def test_a_retry_saves_the_task_without_its_failed_attempt_s_entry() -> None:
    # Spec TQ-10: the retried task starts a fresh conversation; the snapshot saved at the
    # retry holds no in-flight entry for it, so a crash there restarts the task afresh
    # rather than resuming a conversation the new attempt never had.
    call = LLMResponse(
        [ToolUseBlock("c1", "missing", {})], stop_reason="tool_use", usage=TokenUsage(1, 1)
    )
    store = RecordingStore(InMemoryStore())
    team = Team("t", [AgentConfig("w", adapter=Flaky(call, OVERLOADED, answer("fine")))])
    task = Task("a", "x", max_retries=1, retry_delay_ms=1)
    events: list[ProgressEvent] = []
    options = CheckpointOptions(store=store, run_id="retry")
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(
        team, [task], checkpoint=options
    )
    assert result.success
    [reset] = [
        e for e in events if isinstance(e, CheckpointSaved) and e.boundary == "attempt_reset"
    ]
    saved = {
        json.loads(value)["revision"]: json.loads(value)
        for value in store.values("__oma_checkpoint__/")
    }
    before, at_reset = saved[reset.revision - 1], saved[reset.revision]
    assert [entry["taskId"] for entry in before["inFlightTasks"]] == [task.id]  # the failed try
    assert at_reset["inFlightTasks"] == []


async def test_run_finished_says_error_when_a_task_failed() -> None:
    # It said ``ok`` whenever nothing stopped the run, while the result said ``error``.
    class Refusing:
        async def chat(self, messages: object, options: object) -> object:
            raise AuthenticationError("anthropic", "bad key", status=401)

    events: list[object] = []
    team = Team("t", [AgentConfig("w", adapter=Refusing())])  # type: ignore[arg-type]
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(
        team,
        [Task("only", "x", assignee="w")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r"),
    )
    [finished] = [event for event in events if isinstance(event, RunFinished)]
    assert (finished.status, result.status.code) == ("error", "error")
    assert finished.message == result.status.message

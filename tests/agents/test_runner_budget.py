"""``run_task`` with ``AgentConfig(max_token_budget=...)``: OMA's status, no retry, resume."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from oma_actors.agents.config import AgentConfig
from oma_actors.agents.facts import Facts
from oma_actors.agents.runner import ResolvedAgent, run_task
from oma_actors.agents.turn import initial_state
from oma_actors.domain.inflight import BoundaryKind, RunnerState
from oma_actors.domain.messages import LLMResponse, TextBlock, TokenUsage, ToolUseBlock
from oma_actors.domain.tasks import TaskState
from oma_actors.errors import ConfigurationError
from oma_actors.events import ProgressEvent
from oma_actors.llm.scripted import ScriptedAdapter
from oma_actors.tools.base import ToolContext, define_tool


class Query(BaseModel):
    q: str


def agent(adapter: ScriptedAdapter, budget: int | None, ran: list[str]) -> ResolvedAgent:
    async def search(args: Any, ctx: ToolContext) -> str:
        ran.append(args.q)
        return "found"

    tool = define_tool(name="search", description="search", input_model=Query, execute=search)
    config = AgentConfig("worker", adapter=adapter, tools=[tool], max_token_budget=budget)
    return ResolvedAgent(config=config, adapter=adapter)


def search(call_id: str, usage: TokenUsage) -> LLMResponse:
    return LLMResponse(
        [TextBlock("searching"), ToolUseBlock(call_id, "search", {"q": call_id})],
        stop_reason="tool_use",
        usage=usage,
    )


def answer(usage: TokenUsage) -> LLMResponse:
    return LLMResponse([TextBlock("the answer")], usage=usage)


TASK = TaskState(id="t1", title="find", description="find it", status="in_progress", max_retries=2)


async def test_a_budget_reached_mid_run_stops_after_that_turns_tools_for_good() -> None:
    script = ScriptedAdapter(
        [search("c1", TokenUsage(2, 2)), search("c2", TokenUsage(1, 1)), answer(TokenUsage(1, 1))]
    )
    ran: list[str] = []
    seen: list[tuple[BoundaryKind, RunnerState]] = []

    async def boundary(state: RunnerState, kind: BoundaryKind, facts: Facts) -> bool:
        seen.append((kind, state))
        return True

    events: list[ProgressEvent] = []
    outcome = await run_task(
        agent(script, 5, ran), TASK, "go", run_id="r", emit=events.append, on_boundary=boundary
    )
    result = outcome.result
    assert script.call_count == 2  # 4 tokens, then 6 > 5: no third model call
    assert ran == ["c1", "c2"]  # the tripping turn's call still ran (OMA)
    assert outcome.attempts == 1  # never retried, though the task allows 2 retries
    assert result.success is False
    assert result.status is not None
    assert result.status.code == "budget_exhausted"
    assert result.status.message == (
        'Agent "worker" exceeded token budget: 6 tokens used (budget: 5)'
    )
    assert result.output == "searching"
    assert result.token_usage == TokenUsage(3, 3)
    kind, last = seen[-1]
    assert kind == "tool_results"
    assert (last.phase, last.budget_exceeded, last.success) == ("completed", True, False)
    assert not [event for event in events if type(event).__name__ == "TaskRetry"]


async def test_without_a_budget_the_same_script_completes() -> None:
    script = ScriptedAdapter(
        [search("c1", TokenUsage(2, 2)), search("c2", TokenUsage(1, 1)), answer(TokenUsage(1, 1))]
    )
    outcome = await run_task(agent(script, None, []), TASK, "go", run_id="r", emit=lambda e: None)
    assert outcome.result.success is True
    assert outcome.result.status is None
    assert outcome.result.output == "the answer"


async def test_a_resumed_runner_counts_its_restored_usage() -> None:
    # Four tokens were spent before the interruption; the one turn left costs two. A fresh count
    # would stay within 5, the carried count does not.
    restored = replace(initial_state("go"), turns=1, token_usage=TokenUsage(2, 2))
    fresh = await run_task(
        agent(ScriptedAdapter([answer(TokenUsage(1, 1))]), 5, []),
        TASK,
        "go",
        run_id="r",
        emit=lambda e: None,
    )
    assert fresh.result.success is True
    resumed = await run_task(
        agent(ScriptedAdapter([answer(TokenUsage(1, 1))]), 5, []),
        TASK,
        "go",
        run_id="r",
        emit=lambda e: None,
        resume=restored,
    )
    assert resumed.result.success is False
    assert resumed.result.status is not None
    assert resumed.result.status.message == (
        'Agent "worker" exceeded token budget: 6 tokens used (budget: 5)'
    )
    assert resumed.result.turns == 2


async def test_a_restored_flag_fails_the_task_without_a_model_call() -> None:
    # OMA restored a runner that had already completed over budget (phase completed, the flag
    # set): no model call, the task fails; with no budget configured here OMA reports budget 0.
    restored = replace(
        initial_state("go"),
        phase="completed",
        turns=3,
        token_usage=TokenUsage(5, 5),
        final_output="partial",
        budget_exceeded=True,
    )
    script = ScriptedAdapter([])
    outcome = await run_task(
        agent(script, None, []), TASK, "go", run_id="r", emit=lambda e: None, resume=restored
    )
    assert script.call_count == 0
    assert outcome.result.success is False
    assert outcome.result.output == "partial"
    assert outcome.result.status is not None
    assert outcome.result.status.message == (
        'Agent "worker" exceeded token budget: 10 tokens used (budget: 0)'
    )


@pytest.mark.parametrize("budget", [-1, True, "5", 2.5])
def test_a_budget_must_be_a_whole_number_of_tokens(budget: object) -> None:
    with pytest.raises(ConfigurationError, match="max_token_budget"):
        AgentConfig("worker", max_token_budget=budget)  # type: ignore[arg-type]


def test_a_zero_budget_is_allowed_and_no_budget_is_the_default() -> None:
    assert AgentConfig("worker", max_token_budget=0).max_token_budget == 0
    assert AgentConfig("worker").max_token_budget is None


async def test_a_commit_boundary_that_raises_stops_the_task_there() -> None:
    # Not an approval problem (those surface alone, as the run's error): it propagates as
    # the tool calls' group raised it, and the loop neither records the turn's results nor
    # asks the model again (the runner actor turns it into the task's failure).
    script = ScriptedAdapter([search("c1", TokenUsage(1, 1)), answer(TokenUsage(1, 1))])
    ran: list[str] = []
    kinds: list[BoundaryKind] = []

    async def boundary(state: RunnerState, kind: BoundaryKind, facts: Facts) -> bool:
        kinds.append(kind)
        if kind == "tool_commit":
            raise RuntimeError("the writer broke")
        return True

    with pytest.raises(ExceptionGroup) as caught:
        await run_task(
            agent(script, None, ran), TASK, "go", run_id="r", emit=lambda e: None,
            on_boundary=boundary,
        )  # fmt: skip
    assert caught.group_contains(RuntimeError, match="the writer broke")
    assert ran == ["c1"]
    assert script.call_count == 1
    assert "tool_results" not in kinds

"""``AgentConfig(max_token_budget=...)`` end to end: OMA's ``maxTokenBudget`` across restores.

The budget counts the input and output tokens of the agent's task, continuing from the usage a
restored runner saved (the seed: "maxTurns and token budgets do not restart from zero"). When a
response takes the count above it the runner stops (after that turn's tool calls), its state
says ``budgetExceeded``, the task fails and the run's status is ``budget_exhausted``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from acceptance_helpers import answer, calls, run_until
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    ToolContext,
    define_tool,
)
from oma_actors.checkpoint import checkpoint_key
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "run-budget"
BUDGET_MESSAGE = 'Agent "worker" exceeded token budget: 6 tokens used (budget: 5)'


class Query(BaseModel):
    q: str


def lookup(ran: list[str]):  # type: ignore[no-untyped-def]
    async def run(args: Any, ctx: ToolContext) -> str:
        ran.append(args.q)
        return f"found {args.q}"

    return define_tool(name="lookup", description="look up", input_model=Query, execute=run)


def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Turn 1: a lookup (4 tokens); turn 2: another lookup (2 tokens); turn 3: the answer."""
    turn = sum(message.role == "assistant" for message in messages) + 1
    if turn == 1:
        return calls(("c1", "lookup", {"q": "one"}), usage=(2, 2))
    if turn == 2:
        return calls(("c2", "lookup", {"q": "two"}), usage=(1, 1))
    return answer("the answer")


def team(ran: list[str], budget: int | None = 5) -> tuple[Team, ScriptedAdapter]:
    adapter = ScriptedAdapter(script)
    worker = AgentConfig("worker", adapter=adapter, tools=[lookup(ran)], max_token_budget=budget)
    helper = AgentConfig("helper", adapter=ScriptedAdapter(lambda m, o: answer("helped")))
    return Team("t", [worker, helper]), adapter


def tasks() -> list[Task]:
    return [
        Task("research", "look things up", assignee="worker", max_retries=2),
        Task("report", "write it up", assignee="helper", depends_on=["research"]),
        Task("aside", "unrelated", assignee="helper"),
    ]


def options(store: InMemoryStore) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id=RUN)


async def test_a_budget_reached_mid_run_fails_the_task_and_the_run_is_budget_exhausted() -> None:
    ran: list[str] = []
    squad, adapter = team(ran)
    result = await OpenMultiAgent().run_tasks(squad, tasks())
    assert adapter.call_count == 2  # 4 tokens, then 6 > 5: no third model call
    assert ran == ["one", "two"]  # the turn that tripped the budget still ran its call
    statuses = {task.title: task.status for task in result.tasks}
    assert statuses == {"research": "failed", "report": "failed", "aside": "completed"}
    research = next(task for task in result.tasks if task.title == "research")
    worker = result.task_results[research.id]
    assert worker.success is False
    assert worker.status is not None
    assert (worker.status.code, worker.status.message) == ("budget_exhausted", BUDGET_MESSAGE)
    assert (result.success, result.status.code) == (False, "budget_exhausted")
    assert result.status.message == BUDGET_MESSAGE  # OMA: the task result's status
    assert worker.token_usage.input_tokens + worker.token_usage.output_tokens == 6


async def test_without_a_budget_the_same_work_completes() -> None:
    ran: list[str] = []
    squad, adapter = team(ran, budget=None)
    result = await OpenMultiAgent().run_tasks(squad, tasks())
    assert result.success, result.status
    assert adapter.call_count == 3


async def test_run_agent_reports_budget_exhausted() -> None:
    ran: list[str] = []
    squad, _ = team(ran)
    result = await OpenMultiAgent().run_agent(squad.agent("worker"), "look things up")
    assert result.success is False
    assert result.status is not None
    assert (result.status.code, result.status.message) == ("budget_exhausted", BUDGET_MESSAGE)


def after_first_turn(event: ProgressEvent) -> bool:
    """The first turn's tool results are durable: 4 tokens spent, the next call not made."""
    return isinstance(event, CheckpointSaved) and event.boundary == "tool_results"


async def test_usage_carried_across_a_restore_reaches_the_budget() -> None:
    store = InMemoryStore()
    ran: list[str] = []
    squad, adapter = team(ran)

    def start(observe: Callable[[ProgressEvent], None]) -> Any:
        return OpenMultiAgent(on_progress=observe).run_tasks(
            squad, tasks(), checkpoint=options(store)
        )

    await run_until(start, after_first_turn)
    assert (adapter.call_count, ran) == (1, ["one"])
    saved = json.loads((await store.get(checkpoint_key(RUN))).value)  # type: ignore[union-attr]
    [entry] = [e for e in saved["inFlightTasks"] if e["assignee"] == "worker"]
    assert entry["tokenUsage"] == {"input_tokens": 2, "output_tokens": 2}

    # The one turn left costs 2 tokens: within a budget of 5 on a fresh count, over it on the
    # carried count (4 + 2), which is what OMA does.
    restored: TeamRunResult = await OpenMultiAgent().restore(squad, checkpoint=options(store))
    assert adapter.call_count == 2  # resumed at turn 2, no repeat of turn 1
    assert ran == ["one", "two"]
    assert (restored.success, restored.status.code) == (False, "budget_exhausted")
    assert restored.status.message == BUDGET_MESSAGE
    research = next(task for task in restored.tasks if task.title == "research")
    assert research.status == "failed"

    # The last durable state of the runner says so (OMA's budgetExceeded), so a further
    # restore fails the task again without another model call (spec SV-02, LM-14).
    saved = json.loads((await store.get(checkpoint_key(RUN))).value)  # type: ignore[union-attr]
    [entry] = [e for e in saved["inFlightTasks"] if e["assignee"] == "worker"]
    assert (entry["phase"], entry.get("budgetExceeded")) == ("completed", True)
    assert "success" not in entry  # OMA's entry says it through budgetExceeded alone
    again = await OpenMultiAgent().restore(squad, checkpoint=options(store))
    assert adapter.call_count == 2
    assert again.status.code == "budget_exhausted"


async def test_a_fresh_run_with_the_same_budget_does_not_trip_on_the_last_turn_alone() -> None:
    # The control for the restore above: the last turn's 2 tokens are within the budget.
    adapter = ScriptedAdapter([answer("the answer", usage=(1, 1))])
    worker = AgentConfig("worker", adapter=adapter, max_token_budget=5)
    result = await OpenMultiAgent().run_agent(worker, "look things up")
    assert result.success
    assert result.status is None

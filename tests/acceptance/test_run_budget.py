"""``OpenMultiAgent(max_token_budget=, max_cost_budget=, estimate_cost=)``: OMA's run-level budget.

Every finished task is charged; once the run has spent more than its budget it drains what runs,
skips the rest (``Skipped: token budget exceeded.``), reports ``BudgetExceeded`` (OMA's
``budget_exceeded``) and ends ``budget_exhausted``. A restored run's completed results stay
charged, so the budget is not reset by a restore (where OMA's count restarts at zero, LM-16).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from acceptance_helpers import answer, run_until

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.errors import ConfigurationError
from oma_actors.events import BudgetExceeded, CheckpointSaved, ProgressEvent, TaskSkipped
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "run-budget-level"


def team() -> tuple[Team, ScriptedAdapter, ScriptedAdapter]:
    """Two agents on two models; every answer costs 2 + 2 tokens."""
    cheap = ScriptedAdapter(lambda m, o: answer("done", usage=(2, 2)))
    dear = ScriptedAdapter(lambda m, o: answer("done", usage=(2, 2)))
    agents = [
        AgentConfig("small", model="small-model", adapter=cheap),
        AgentConfig("large", model="large-model", adapter=dear),
    ]
    return Team("t", agents), cheap, dear


def tasks() -> list[Task]:
    return [
        Task("one", "1", assignee="small"),
        Task("two", "2", assignee="large", depends_on=["one"]),
        Task("three", "3", assignee="small", depends_on=["two"]),
    ]


def price(usage: TokenUsage, model: str) -> float:
    per_token = {"small-model": 0.5, "large-model": 2.0}[model]
    return (usage.input_tokens + usage.output_tokens) * per_token


async def test_a_run_over_its_token_budget_stops_and_is_budget_exhausted() -> None:
    squad, cheap, dear = team()
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(on_progress=events.append, max_token_budget=6)
    result = await orchestrator.run_tasks(squad, tasks())
    assert (cheap.call_count, dear.call_count) == (1, 1)  # 4, then 8 > 6: "three" never runs
    assert [task.status for task in result.tasks] == ["completed", "completed", "skipped"]
    message = 'Agent "large" exceeded token budget: 8 tokens used (budget: 6)'
    assert (result.success, result.status.code, result.status.message) == (
        False, "budget_exhausted", message
    )  # fmt: skip
    [exceeded] = [e for e in events if isinstance(e, BudgetExceeded)]
    assert (exceeded.kind, exceeded.used, exceeded.budget) == ("tokens", 8, 6)
    skips = [e.reason for e in events if isinstance(e, TaskSkipped)]
    assert skips == ["Skipped: token budget exceeded."]


async def test_within_the_budget_the_same_work_completes() -> None:
    squad, _, _ = team()
    result = await OpenMultiAgent(max_token_budget=12).run_tasks(squad, tasks())
    assert result.success, result.status


async def test_a_cost_budget_prices_each_task_on_its_agents_model() -> None:
    squad, cheap, dear = team()
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(
        on_progress=events.append, max_cost_budget=9.0, estimate_cost=price
    )
    result = await orchestrator.run_tasks(squad, tasks())
    # "one" costs 4 * 0.5 = 2, "two" 4 * 2 = 8: 10 > 9. By tokens alone (8) it would not stop.
    assert (cheap.call_count, dear.call_count) == (1, 1)
    assert result.status.code == "budget_exhausted"
    assert result.status.message == (
        'Agent "large" exceeded cost budget: 10 estimated cost used (budget: 9)'
    )
    [exceeded] = [e for e in events if isinstance(e, BudgetExceeded)]
    assert (exceeded.kind, exceeded.used) == ("cost", 10.0)
    assert [e.reason for e in events if isinstance(e, TaskSkipped)] == [
        "Skipped: cost budget exceeded."
    ]


async def test_the_budget_counts_the_restored_results() -> None:
    store = InMemoryStore()
    squad, cheap, dear = team()
    options = CheckpointOptions(store=store, run_id=RUN)

    def first_done(event: ProgressEvent) -> bool:
        return isinstance(event, CheckpointSaved) and event.boundary == "task_completed"

    def start(observe: Callable[[ProgressEvent], None]) -> Any:
        return OpenMultiAgent(on_progress=observe).run_tasks(squad, tasks(), checkpoint=options)

    await run_until(start, first_done)
    assert (cheap.call_count, dear.call_count) == (1, 0)
    # "two" alone spends 4 <= 6; with "one" restored as completed the run has spent 8 > 6.
    restored = await OpenMultiAgent(max_token_budget=6).restore(squad, checkpoint=options)
    assert (cheap.call_count, dear.call_count) == (1, 1)
    assert restored.status.code == "budget_exhausted"
    assert [task.status for task in restored.tasks] == ["completed", "completed", "skipped"]


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"max_token_budget": 0}, "max_token_budget"),
        ({"max_token_budget": True}, "max_token_budget"),
        ({"max_cost_budget": 1.0}, "estimate_cost"),
        ({"max_cost_budget": float("nan"), "estimate_cost": price}, "max_cost_budget"),
        ({"max_cost_budget": 1.0, "estimate_cost": "cheap"}, "estimate_cost"),
    ],
)
def test_a_bad_budget_is_refused_when_the_orchestrator_is_built(
    kwargs: dict[str, Any], names: str
) -> None:
    with pytest.raises(ConfigurationError, match=names):
        OpenMultiAgent(**kwargs)


async def test_tasks_draining_after_the_budget_ran_out_report_it_once() -> None:
    squad, cheap, _ = team()
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(on_progress=events.append, max_token_budget=3)
    independent = [Task(name, name, assignee="small") for name in ("a", "b", "c")]
    result = await orchestrator.run_tasks(squad, independent)
    assert cheap.call_count == 3  # all three were running when the first one finished
    assert [e.used for e in events if isinstance(e, BudgetExceeded)] == [4]
    assert result.status.message == (
        'Agent "small" exceeded token budget: 4 tokens used (budget: 3)'
    )


async def test_a_failed_tasks_tokens_are_charged_too() -> None:
    spent = ScriptedAdapter(lambda m, o: answer("too long", usage=(3, 3)))
    fresh = ScriptedAdapter(lambda m, o: answer("done"))
    squad = Team(
        "t",
        [
            AgentConfig("spender", adapter=spent, max_token_budget=5),  # fails: 6 > 5
            AgentConfig("other", adapter=fresh),
        ],
    )
    work = [Task("one", "1", assignee="spender"), Task("two", "2", assignee="other")]
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(on_progress=events.append, max_token_budget=5, max_concurrency=1)
    result = await orchestrator.run_tasks(squad, work)
    assert fresh.call_count == 0
    assert [task.status for task in result.tasks] == ["failed", "skipped"]
    assert [e.used for e in events if isinstance(e, BudgetExceeded)] == [6]

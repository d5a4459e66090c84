"""The coordinator's tokens count toward the run's budget, as OMA counts them (item 3 of #23).

OMA charges the decomposition to ``maxTokenBudget``/``maxCostBudget`` before any task (over the
budget: ``budget_exceeded`` and no task runs), the tasks on top of it, and the synthesis after
them (over the budget: the synthesis fails and the run is ``budget_exhausted``). Each case
below is within the budget when the coordinator's usage is left out, so it fails without the
charge.
"""

from __future__ import annotations

from coordinator_scenario import lead, team

from oma_actors import OpenMultiAgent, TokenUsage
from oma_actors.events import BudgetExceeded, ProgressEvent


async def run(
    budget: int | None = None, **options: object
) -> tuple[object, list[ProgressEvent], object]:
    squad, worker = team(worker=(1, 1))
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(on_progress=events.append, max_token_budget=budget, **options)  # type: ignore[arg-type]
    result = await orchestrator.run_team(
        squad, "explain", coordinator=lead(plan=(10, 4), synthesis=(5, 2))
    )
    return result, events, worker


def exceeded(events: list[ProgressEvent]) -> list[BudgetExceeded]:
    return [e for e in events if isinstance(e, BudgetExceeded)]


async def test_a_decomposition_over_the_budget_runs_no_task() -> None:
    result, events, worker = await run(budget=13)  # the plan alone is 14
    assert worker.call_count == 0  # type: ignore[attr-defined]
    message = 'Agent "coordinator" exceeded token budget: 14 tokens used (budget: 13)'
    assert (result.status.code, result.status.message) == ("budget_exhausted", message)  # type: ignore[attr-defined]
    [event] = exceeded(events)
    assert (event.kind, event.used, event.budget) == ("tokens", 14, 13)


async def test_the_tasks_are_charged_on_top_of_the_decomposition() -> None:
    result, events, worker = await run(budget=15)  # plan 14 + first task 2 = 16 > 15
    assert worker.call_count == 1  # type: ignore[attr-defined]
    assert [t.status for t in result.tasks] == ["completed", "skipped"]  # type: ignore[attr-defined]
    assert result.status.code == "budget_exhausted"  # type: ignore[attr-defined]
    assert [e.used for e in exceeded(events)] == [16]


async def test_a_synthesis_over_the_budget_fails_the_run() -> None:
    result, events, worker = await run(budget=20)  # 14 + 2 + 2 = 18, then the answer's 7: 25
    assert worker.call_count == 2  # type: ignore[attr-defined]
    assert result.status.code == "budget_exhausted"  # type: ignore[attr-defined]
    message = 'Agent "coordinator" exceeded token budget: 25 tokens used (budget: 20)'
    assert result.status.message == message  # type: ignore[attr-defined]
    coordinator = result.agent_results["coordinator"]  # type: ignore[attr-defined]
    assert not coordinator.success
    assert coordinator.output == "final answer"  # OMA still returns the answer it paid for
    assert [e.used for e in exceeded(events)] == [25]


async def test_within_the_budget_the_run_completes_and_reports_every_token() -> None:
    result, events, _ = await run(budget=25)
    assert result.success, result.status  # type: ignore[attr-defined]
    assert result.token_usage == TokenUsage(10 + 1 + 1 + 5, 4 + 1 + 1 + 2)  # type: ignore[attr-defined]
    assert not exceeded(events)


async def test_the_cost_budget_prices_the_coordinator_on_its_model() -> None:
    seen: list[str] = []

    def price(usage: TokenUsage, model: str) -> float:
        seen.append(model)
        return (usage.input_tokens + usage.output_tokens) * (1.0 if model == "lead-model" else 0.0)

    result, events, worker = await run(max_cost_budget=13.0, estimate_cost=price)
    assert "lead-model" in seen
    assert worker.call_count == 0  # type: ignore[attr-defined]
    assert result.status.code == "budget_exhausted"  # type: ignore[attr-defined]
    [event] = exceeded(events)
    assert (event.kind, event.used) == ("cost", 14.0)

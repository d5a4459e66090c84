"""A task the estimator cannot price is never priced again by the synthesis's charge.

OMA fails such a task with the estimator's message and never charges it (budget.ts 184-198:
its accounting throws before adding the usage); its running total then prices only the
synthesis (coordinator.ts 608-625). Ours used to price every task result again when it charged
the synthesis (``goal_flow.charge_synthesis``), so the estimator's error escaped ``run_team``.
"""

from __future__ import annotations

from test_budget_event_parity import lead, spender

from oma_actors import OpenMultiAgent, Team, TokenUsage
from oma_actors.events import ProgressEvent, TaskFailed


def price(usage: TokenUsage, model: str) -> float:
    """Every model has a price but the worker's."""
    if model == "worker-model":
        raise ValueError("no price for worker-model")
    return 0.0


async def test_a_team_run_with_an_unpriced_task_charges_the_synthesis_and_ends() -> None:
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(
        on_progress=events.append, max_cost_budget=100, estimate_cost=price
    )
    squad = Team("t", [spender("worker", (1, 1), "worker-model")])
    result = await orchestrator.run_team(
        squad, "explain", coordinator=lead(plan=(10, 4), synthesis=(5, 2))
    )
    failed = [event for event in events if isinstance(event, TaskFailed)]
    assert "no price for worker-model" in failed[0].error  # its dependent is cancelled after
    assert [task.status for task in result.tasks] == ["failed"] * len(result.tasks)
    assert result.agent_results["coordinator"].output == "final answer"

"""A run's budget is reported once, even when two suspending tasks pass it (``RunActor._over``).

The guard: ``if budget is None or self._over_budget or ...: return None`` in ``RunActor._over``.
A task suspended on a tool approval is priced even while another suspension stands (OMA charges
the suspended result, task-execution.ts 1375-1391), so the ``_over_budget`` flag is what keeps
the second suspended task from reporting ``BudgetExceeded`` again: OMA's
``budgetExceededTriggered`` flag reports it once per run (budget.ts ``recordRunUsage``).
"""

from __future__ import annotations

from charge_card import paying_agent, suspend

from oma_actors import (
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
)
from oma_actors.events import BudgetExceeded, ProgressEvent
from oma_actors.stores import InMemoryStore


async def test_two_suspended_tasks_over_the_budget_report_it_once() -> None:
    """Guard: ``self._over_budget`` in ``RunActor._over`` (BudgetExceeded once per run)."""
    team = Team(
        "billing",
        [
            paying_agent("payer-a", usage=TokenUsage(10, 20)),
            paying_agent("payer-b", usage=TokenUsage(10, 20)),
        ],
    )
    tasks = [
        Task("pay a", "charge card a", id="pay-a", assignee="payer-a"),
        Task("pay b", "charge card b", id="pay-b", assignee="payer-b"),
    ]
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(
        on_tool_call=suspend, on_progress=events.append, max_token_budget=25
    ).run_tasks(
        team, tasks, checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="run-budget-once")
    )

    assert result.status.code == "suspended"
    assert len(result.pending_approvals) == 2
    # 30 tokens passed 25 with the first suspended result; the second (60) reports nothing more.
    [over] = [e for e in events if isinstance(e, BudgetExceeded)]
    assert (over.kind, over.used, over.budget) == ("tokens", 30, 25)
    assert [task.status for task in result.tasks] == ["in_progress", "in_progress"]

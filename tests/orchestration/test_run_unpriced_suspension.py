"""A suspended task whose cost the estimator cannot give fails (``RunActor._finish``).

The guard: ``if outcome.suspended and unpriced is None`` takes the suspended branch only for a
result that could be priced. OMA prices every result, a suspended one too, inside a ``try``
before its suspended branch (task-execution.ts 1375-1415, sources at 16562ed): an estimator
that throws fails that task with the error's message and returns. Without the ``unpriced``
check the task would stay suspended with a cost that was never charged, and the run would end
``suspended`` instead of reporting the failure.
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
from oma_actors.events import ProgressEvent, TaskFailed
from oma_actors.stores import InMemoryStore


def _no_price(usage: TokenUsage, model: str) -> float:
    raise KeyError(f"no price for {model}")


async def test_a_suspended_task_the_estimator_cannot_price_fails_instead_of_suspending() -> None:
    """Guard: ``unpriced is None`` in ``if outcome.suspended and unpriced is None``."""
    team = Team(
        "billing",
        [paying_agent(model="odd-model", usage=TokenUsage(10, 20))],
    )
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(
        on_tool_call=suspend,
        on_progress=events.append,
        max_cost_budget=100.0,
        estimate_cost=_no_price,
    ).run_tasks(
        team,
        [Task("pay", "charge the card", id="pay", assignee="payer")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="run-unpriced"),
    )

    assert result.status.code != "suspended"
    [task] = result.tasks
    assert task.status == "failed"
    [failed] = [e for e in events if isinstance(e, TaskFailed)]
    assert failed.task_id == "pay"
    assert failed.error == "'no price for odd-model'"
    assert result.task_results["pay"].success is False
    # A failed task waits for no reviewer: its call's request is not left pending.
    assert result.pending_approvals == []

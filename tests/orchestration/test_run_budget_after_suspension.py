"""A task that finishes after a run suspended is still charged to the run's budget
(``RunActor._over`` and ``RunActor._spend``).

OMA (sources at 16562ed) charges every result the loop drains: ``recordRunUsage``
(``orchestrator/budget.ts`` 184-211) runs for each finished task whatever the loop's state
(``orchestrator/task-execution.ts`` 1380-1391), so a sibling that finishes after another task
suspended on a tool approval and passes ``maxTokenBudget`` is reported (``budget_exceeded``,
once), and a cost the estimator cannot give fails it (1392-1415). The loop still suspends
before it stops (796-807): nothing is skipped, and the suspended task can resume.

Ours used to skip the charge once the run was suspending: no ``BudgetExceeded`` was reported,
and an unpriced sibling completed. Ours reports the event after the task's completion events
(EV-01, as every charge) and keeps the run ``suspended`` (AP-27), where OMA's status becomes
``budget_exhausted`` (budget.ts 207 sets it over the suspension).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from charge_card import paying_agent, suspend

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    TokenUsage,
)
from oma_actors.events import (
    AgentCompleted,
    BudgetExceeded,
    ProgressEvent,
    TaskCompleted,
    TaskFailed,
    TaskSkipped,
)
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from oma_actors.llm import ChatOptions, Message

AUDIT = TokenUsage(50, 0)
"""The auditor's answer: with the payer's 2 tokens, 52 pass a budget of 40."""


class AfterSuspension:
    """The auditor's model: it answers only once the payer's suspension was reported, so the
    auditor finishes while the run is suspending."""

    def __init__(self, suspended: asyncio.Event) -> None:
        self._suspended = suspended

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        """Wait for the payer's suspension, then answer with ``AUDIT``'s tokens."""
        await self._suspended.wait()
        return LLMResponse([TextBlock("audited")], usage=AUDIT)


async def _run(orchestrator: OpenMultiAgent, suspended: asyncio.Event) -> TeamRunResult:
    team = Team(
        "billing",
        [
            paying_agent(model="pay-model"),
            AgentConfig("auditor", model="audit-model", adapter=AfterSuspension(suspended)),
            AgentConfig("reporter", adapter=ScriptedAdapter([])),
        ],
    )
    tasks = [
        Task("pay", "charge the card", id="pay", assignee="payer"),
        Task("audit", "audit the books", id="audit", assignee="auditor"),
        Task("report", "report it", id="report", assignee="reporter", depends_on=["pay"]),
    ]
    checkpoint = CheckpointOptions(store=InMemoryStore(), run_id="run-budget-after-suspension")
    return await orchestrator.run_tasks(team, tasks, checkpoint=checkpoint)


def _recorder(
    events: list[ProgressEvent], suspended: asyncio.Event
) -> Callable[[ProgressEvent], None]:
    def seen(event: ProgressEvent) -> None:
        events.append(event)
        if isinstance(event, AgentCompleted) and event.task_id == "pay":
            suspended.set()  # the payer's suspended result: the run is suspending

    return seen


async def test_a_task_passing_the_budget_after_a_suspension_is_reported() -> None:
    """Guard: ``_over`` charges a result while the run is suspending (``Wait``)."""
    events: list[ProgressEvent] = []
    suspended = asyncio.Event()
    orchestrator = OpenMultiAgent(
        on_tool_call=suspend, on_progress=_recorder(events, suspended), max_token_budget=40
    )
    result = await _run(orchestrator, suspended)

    [over] = [e for e in events if isinstance(e, BudgetExceeded)]
    assert (over.kind, over.used, over.budget) == ("tokens", 52, 40)
    assert over.message == 'Agent "auditor" exceeded token budget: 52 tokens used (budget: 40)'
    # EV-01: the charge is reported once the auditor's completion is durable and announced.
    audit = [
        type(e).__name__
        for e in events
        if isinstance(e, BudgetExceeded)
        or (isinstance(e, TaskCompleted | AgentCompleted) and e.task_id == "audit")
    ]
    assert audit == ["TaskCompleted", "AgentCompleted", "BudgetExceeded"]
    assert result.token_usage == TokenUsage(1, 1) + AUDIT


async def test_a_budget_passed_after_a_suspension_leaves_the_run_suspended() -> None:
    """Guard: ``_spend`` does not stop a suspending run (``isinstance(self._stop, Wait)``)."""
    events: list[ProgressEvent] = []
    suspended = asyncio.Event()
    orchestrator = OpenMultiAgent(
        on_tool_call=suspend, on_progress=_recorder(events, suspended), max_token_budget=40
    )
    result = await _run(orchestrator, suspended)

    assert [e for e in events if isinstance(e, BudgetExceeded)]
    # OMA's loop suspends before it stops (task-execution.ts 796-807): nothing is skipped.
    assert result.status.code == "suspended"
    assert not [e for e in events if isinstance(e, TaskSkipped)]
    assert {task.id: task.status for task in result.tasks} == {
        "pay": "in_progress",
        "audit": "completed",
        "report": "blocked",
    }
    assert len(result.pending_approvals) == 1


def _price(usage: TokenUsage, model: str) -> float:
    if model == "audit-model":
        raise KeyError(f"no price for {model}")
    return 0.0


async def test_a_task_the_estimator_cannot_price_after_a_suspension_fails() -> None:
    """Guard: ``_over`` prices a result while the run is suspending (task-execution.ts
    1392-1415 fail the task with the estimator's message; the run still suspends)."""
    events: list[ProgressEvent] = []
    suspended = asyncio.Event()
    orchestrator = OpenMultiAgent(
        on_tool_call=suspend,
        on_progress=_recorder(events, suspended),
        max_cost_budget=100.0,
        estimate_cost=_price,
    )
    result = await _run(orchestrator, suspended)

    [failed] = [e for e in events if isinstance(e, TaskFailed)]
    assert (failed.task_id, failed.error) == ("audit", "'no price for audit-model'")
    assert not [e for e in events if isinstance(e, TaskCompleted)]
    assert result.status.code == "suspended"
    assert {task.id: task.status for task in result.tasks} == {
        "pay": "in_progress",
        "audit": "failed",
        "report": "blocked",
    }
    assert len(result.pending_approvals) == 1

"""The tokens of a task suspended on a tool approval, as OMA counts them (its sources at 16562ed).

OMA (``packages/core/src``) keeps the suspended result (``orchestrator/task-execution.ts`` 1357)
and charges it to the run's budget (1375-1391) before its suspended branch (1418-1431), so the
suspended run's ``totalTokenUsage`` (the sum of its results, ``orchestrator.ts`` 3258-3275)
counts them and they can pass the budget. A budget passed there is reported
(``orchestrator/budget.ts`` 184-211) but the run still suspends: the suspended branch sets the
run's status after the charge, and the loop suspends before it stops (task-execution.ts 796-806).
After approval, the restored runner starts from the saved in-flight usage (``agent/runner.ts``
893), so the resumed result holds the tokens of both sides of the suspension
(``tests/checkpoint.test.ts`` 1078); the restore holds only completed results
(``orchestrator.ts`` 3187-3210), so those tokens are counted once, not twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Reviewer, Suspend, decide_approval
from oma_actors.approvals.gates import ToolCallRequest
from oma_actors.events import AgentCompleted, BudgetExceeded, ProgressEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "suspended-usage"
BEFORE, AFTER, REPORT = TokenUsage(10, 20), TokenUsage(2, 3), TokenUsage(1, 1)
"""The tool-call turn before the suspension, the answer after it, the dependent task's answer."""


class Charge(BaseModel):
    amount: int


async def _charge(args: Charge, ctx: ToolContext) -> str:
    return "charged"


CHARGE = define_tool(name="charge_card", description="charge", input_model=Charge, execute=_charge)


def _payer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) > 1:  # the approved call's result is in: answer
        return LLMResponse([TextBlock("paid")], stop_reason="end_turn", usage=AFTER)
    call = ToolUseBlock("call-1", "charge_card", {"amount": 7})
    return LLMResponse([call], stop_reason="tool_use", usage=BEFORE)


def _team() -> Team:
    reporter = ScriptedAdapter([LLMResponse([TextBlock("report")], usage=REPORT)])
    return Team(
        "billing",
        [
            AgentConfig("payer", adapter=ScriptedAdapter(_payer), tools=[CHARGE]),
            AgentConfig("reporter", adapter=reporter),
        ],
    )


def _tasks() -> list[Task]:
    return [
        Task("pay", "charge the card", id="pay", assignee="payer"),
        Task("report", "report it", id="report", assignee="reporter", depends_on=["pay"]),
    ]


def _suspend_gate(call: ToolCallRequest) -> Suspend:
    return Suspend("Finance review")


async def _suspended(
    store: InMemoryStore, budget: int | None = None
) -> tuple[TeamRunResult, list[ProgressEvent]]:
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(
        on_tool_call=_suspend_gate, on_progress=events.append, max_token_budget=budget
    )
    result = await orchestrator.run_tasks(
        _team(), _tasks(), checkpoint=CheckpointOptions(store=store, run_id=RUN)
    )
    assert result.status.code == "suspended"
    return result, events


async def approve_pending(store: InMemoryStore, suspended: TeamRunResult) -> None:
    """Approve the one approval ``suspended`` waits for, as ``finance``."""
    [request] = suspended.pending_approvals
    await decide_approval(
        store,
        request_id=request.id,
        request_hash=request.request_hash,
        decision="approve",
        reviewer=Reviewer("finance"),
    )


async def _approve_and_restore(
    store: InMemoryStore, suspended: TeamRunResult, budget: int | None = None
) -> tuple[TeamRunResult, list[ProgressEvent]]:
    await approve_pending(store, suspended)
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(on_progress=events.append, max_token_budget=budget)
    result = await orchestrator.restore(
        _team(), checkpoint=CheckpointOptions(store=store, run_id=RUN)
    )
    return result, events


async def test_a_suspended_run_reports_the_suspended_tasks_tokens() -> None:
    # task-execution.ts 1357 keeps the suspended result; orchestrator.ts 3258-3275 sums every
    # result into totalTokenUsage and collapses it under its agent, 3240-3245 lists it by task.
    result, _ = await _suspended(InMemoryStore())
    assert result.token_usage == BEFORE
    assert result.task_results["pay"].token_usage == BEFORE
    assert not result.task_results["pay"].success
    assert result.agent_results["payer"].token_usage == BEFORE
    assert "report" not in result.task_results


async def test_the_restored_run_counts_the_tokens_before_the_suspension_once() -> None:
    # runner.ts 893: the resumed runner starts from the saved in-flight usage (checkpoint.test.ts
    # 1078: 1+1 before, 1+1 after). orchestrator.ts 3187-3210: only completed results come back.
    store = InMemoryStore()
    suspended, _ = await _suspended(store)
    result, _ = await _approve_and_restore(store, suspended)
    assert result.status.code == "ok"
    assert result.task_results["pay"].token_usage == BEFORE + AFTER
    assert result.token_usage == BEFORE + AFTER + REPORT


async def test_a_budget_passed_by_a_suspending_task_is_reported_and_the_run_suspends() -> None:
    # budget.ts 184-211 reports budget_exceeded once; task-execution.ts 1381 charges before the
    # agent_complete of 1426, and 1418-1422 + 796-806 keep the run suspended: nothing skipped.
    result, events = await _suspended(InMemoryStore(), budget=25)
    [over] = [e for e in events if isinstance(e, BudgetExceeded)]
    assert (over.kind, over.used, over.budget) == ("tokens", 30, 25)
    assert over.message == 'Agent "payer" exceeded token budget: 30 tokens used (budget: 25)'
    order = [type(e) for e in events if isinstance(e, BudgetExceeded | AgentCompleted)]
    assert order == [BudgetExceeded, AgentCompleted]
    assert result.status.code == "suspended"
    assert len(result.pending_approvals) == 1
    assert [task.status for task in result.tasks] == ["in_progress", "blocked"]  # not skipped
    assert result.token_usage == BEFORE


async def test_a_suspension_within_the_budget_reports_nothing() -> None:
    # budget.ts 137-139: only a total above maxTokenBudget trips it (30 of 30 does not).
    _, events = await _suspended(InMemoryStore(), budget=30)
    assert not [e for e in events if isinstance(e, BudgetExceeded)]


async def test_the_restored_run_is_not_charged_twice_for_the_suspended_task() -> None:
    # 30 before + 5 after + 2 reporting = 37 <= 40: the resumed result replaces the suspended one.
    # Charged twice (30 + 35 + 2 = 67), the run would end budget_exhausted.
    store = InMemoryStore()
    suspended, _ = await _suspended(store, budget=40)
    result, events = await _approve_and_restore(store, suspended, budget=40)
    assert not [e for e in events if isinstance(e, BudgetExceeded)]
    assert result.status.code == "ok"
    assert result.token_usage == BEFORE + AFTER + REPORT


async def test_the_restored_run_charges_the_tokens_before_the_suspension() -> None:
    # runner.ts 893 + task-execution.ts 1381: the resumed result (30 + 5 = 35) is charged in the
    # restored run, so a budget of 32 trips there and the dependent task is skipped.
    store = InMemoryStore()
    suspended, _ = await _suspended(store, budget=32)
    result, events = await _approve_and_restore(store, suspended, budget=32)
    [over] = [e for e in events if isinstance(e, BudgetExceeded)]
    assert (over.used, over.budget) == (35, 32)
    assert result.status.code == "budget_exhausted"
    assert [task.status for task in result.tasks] == ["completed", "skipped"]
    assert result.token_usage == BEFORE + AFTER


async def test_a_suspension_after_the_budget_stopped_the_run_still_suspends() -> None:
    # task-execution.ts 1518-1521 and 796-806: once a task suspended, the loop suspends before
    # it stops for the budget, so the run ends suspended with nothing skipped (1418-1422 set the
    # status last). Here another task passes the budget while the payer waits at its gate.
    events: list[ProgressEvent] = []
    over_budget = asyncio.Event()

    def seen(event: ProgressEvent) -> None:
        events.append(event)
        if isinstance(event, BudgetExceeded):
            over_budget.set()

    async def gate(call: ToolCallRequest) -> Suspend:
        await over_budget.wait()  # the payer suspends only once the budget has stopped the run
        return Suspend("Finance review")

    auditor = ScriptedAdapter([LLMResponse([TextBlock("audit")], usage=TokenUsage(50, 0))])
    team = Team(
        "billing",
        [
            AgentConfig("payer", adapter=ScriptedAdapter(_payer), tools=[CHARGE]),
            AgentConfig("reporter", adapter=ScriptedAdapter([])),
            AgentConfig("auditor", adapter=auditor),
        ],
    )
    tasks = [*_tasks(), Task("audit", "audit", id="audit", assignee="auditor")]
    result = await OpenMultiAgent(
        on_tool_call=gate, on_progress=seen, max_token_budget=40
    ).run_tasks(team, tasks, checkpoint=CheckpointOptions(store=InMemoryStore(), run_id=RUN))
    [over] = [e for e in events if isinstance(e, BudgetExceeded)]
    assert (over.used, over.budget) == (50, 40)
    assert result.status.code == "suspended"
    assert {task.id: task.status for task in result.tasks} == {
        "pay": "in_progress", "report": "blocked", "audit": "completed",
    }  # fmt: skip
    assert len(result.pending_approvals) == 1
    assert result.token_usage == BEFORE + TokenUsage(50, 0)

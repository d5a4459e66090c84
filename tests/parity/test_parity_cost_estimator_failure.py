"""A cost the estimator cannot give fails the task being priced, and the run goes on (OMA).

OMA prices each task's result as it finishes (``orchestrator/task-execution.ts`` 1375-1391,
sources at 16562ed). ``estimateIncrementalCost`` throws when the estimator throws or returns a
cost that is not a finite number >= 0 (``orchestrator/budget.ts`` 104-116); the ``catch`` at
task-execution.ts 1392-1415 fails that task with the error's message (``queue.fail``) and returns,
so the other tasks go on. Ours ended the whole run with the estimator's exception, and summed a
NaN cost silently (NaN passes no budget comparison).
"""

from __future__ import annotations

import math

import pytest

from oma_actors import (
    AgentConfig,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
)
from oma_actors.events import BudgetExceeded, ProgressEvent, TaskCompleted, TaskFailed
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.testing import ScriptedAdapter


def _answering() -> ScriptedAdapter:
    return ScriptedAdapter(lambda m, o: LLMResponse([TextBlock("done")], usage=TokenUsage(2, 2)))


def _team() -> Team:
    return Team(
        "t",
        [
            AgentConfig("small", model="small-model", adapter=_answering()),
            AgentConfig("odd", model="odd-model", adapter=_answering()),
        ],
    )


def _tasks() -> list[Task]:
    return [
        Task("one", "1", id="one", assignee="small"),
        Task("two", "2", id="two", assignee="odd", depends_on=["one"]),
        Task("three", "3", id="three", assignee="small", depends_on=["one"]),
    ]


def _raising(usage: TokenUsage, model: str) -> float:
    if model == "odd-model":
        raise KeyError("no price for odd-model")
    return 0.5 * (usage.input_tokens + usage.output_tokens)


def _nan(usage: TokenUsage, model: str) -> float:
    return math.nan if model == "odd-model" else 1.0


@pytest.mark.parametrize(
    ("estimate", "message"),
    [
        (_raising, "'no price for odd-model'"),
        (_nan, "Cost estimator returned invalid cost for model 'odd-model': nan"),
    ],
)
async def test_the_task_whose_cost_cannot_be_given_fails_and_the_others_complete(
    estimate: object, message: str
) -> None:
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(
        on_progress=events.append,
        max_cost_budget=100.0,
        estimate_cost=estimate,  # type: ignore[arg-type]
        max_concurrency=1,
    )
    result = await orchestrator.run_tasks(_team(), _tasks())
    statuses = {task.id: task.status for task in result.tasks}
    assert statuses == {"one": "completed", "two": "failed", "three": "completed"}
    assert result.task_results["two"].output == message
    assert not result.task_results["two"].success
    assert result.status.code == "error"  # a task failed; the run itself did not raise
    [failed] = [e for e in events if isinstance(e, TaskFailed)]
    assert (failed.task_id, failed.error) == ("two", message)


async def test_a_passed_budget_is_still_reported_after_the_task_s_durable_end() -> None:
    # Pricing moved before the task's end; the report of a passed budget did not: no observer
    # hears of it before the completion it follows is durable (spec EV-01).
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(
        on_progress=events.append, max_cost_budget=1.0, estimate_cost=_raising
    )
    result = await orchestrator.run_tasks(_team(), _tasks()[:1])
    kinds = [type(e).__name__ for e in events if isinstance(e, TaskCompleted | BudgetExceeded)]
    assert kinds == ["TaskCompleted", "BudgetExceeded"]
    assert result.status.code == "budget_exhausted"

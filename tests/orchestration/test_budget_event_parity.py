"""``BudgetExceeded`` names the charge that passed the run's budget, in OMA's words.

OMA's ``recordRunUsage`` (budget.ts 184-211) reports ``budget_exceeded`` with the ``agent`` and
``task`` it charged, and its data is the error whose message is ``Agent "<agent>" exceeded token
budget: <n> tokens used (budget: <b>)`` or ``... exceeded cost budget: <c> estimated cost used
(budget: <b>)`` (errors.ts 27-56), numbers as JavaScript writes them. A task's charge names its
assignee and id (task-execution.ts 1381-1387); the coordinator's decomposition and synthesis
name ``coordinator`` and no task (orchestrator.ts 1565, coordinator.ts 625), the synthesis
charged after the tasks. A restore already over its budget names the restored charge that took
the run over.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.events import BudgetExceeded, ProgressEvent, TaskCompleted
from oma_actors.journal.jsjson import js_number
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors import TeamRunResult
    from oma_actors.llm import ChatOptions, Message

PLAN = [
    {"title": "Research", "description": "find facts", "assignee": "worker"},
    {"title": "Write", "description": "write", "assignee": "worker", "dependsOn": ["Research"]},
]


def answer(text: str, usage: tuple[int, int]) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(*usage))


def spender(name: str, usage: tuple[int, int], model: str = "m") -> AgentConfig:
    """An agent whose every answer costs ``usage``."""
    return AgentConfig(name, model=model, adapter=ScriptedAdapter(lambda m, o: answer("x", usage)))


def over(events: list[ProgressEvent]) -> tuple[str | None, str | None, str]:
    """The one ``BudgetExceeded``'s agent, task and message."""
    [event] = [e for e in events if isinstance(e, BudgetExceeded)]
    return event.agent, event.task_id, event.message


async def run_tasks(events: list[ProgressEvent], **budget: object) -> TeamRunResult:
    """ "one" by ``small`` (2 + 2 tokens), then "two" by ``large`` (2 + 2)."""
    squad = Team(
        "t", [spender("small", (2, 2), "small-model"), spender("large", (2, 2), "large-model")]
    )
    tasks = [
        Task("one", "1", id="one", assignee="small"),
        Task("two", "2", id="two", assignee="large", depends_on=["one"]),
        Task("three", "3", id="three", assignee="small", depends_on=["two"]),
    ]
    orchestrator = OpenMultiAgent(on_progress=events.append, **budget)  # type: ignore[arg-type]
    return await orchestrator.run_tasks(squad, tasks)


async def test_run_tasks_names_the_task_that_passed_the_token_budget() -> None:
    events: list[ProgressEvent] = []
    result = await run_tasks(events, max_token_budget=6)  # 4, then 8 > 6 with "two"
    message = 'Agent "large" exceeded token budget: 8 tokens used (budget: 6)'
    assert over(events) == ("large", "two", message)
    assert result.status.message == message


async def test_run_tasks_names_the_task_that_passed_the_cost_budget_in_omas_numbers() -> None:
    def price(usage: TokenUsage, model: str) -> float:
        return {"small-model": 0.1, "large-model": 0.2}[model]

    events: list[ProgressEvent] = []
    result = await run_tasks(events, max_cost_budget=0.3, estimate_cost=price)
    # 0.1 + 0.2 is 0.30000000000000004 > 0.3: JavaScript writes every digit, ``:g`` would not.
    message = (
        'Agent "large" exceeded cost budget: 0.30000000000000004 estimated cost used (budget: 0.3)'
    )
    assert over(events) == ("large", "two", message)
    assert result.status.message == message


def lead(plan: tuple[int, int], synthesis: tuple[int, int]) -> AgentConfig:
    """A coordinator whose plan costs ``plan`` tokens and whose answer costs ``synthesis``."""

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        first = messages[0].content[0]
        if isinstance(first, TextBlock) and "Break the goal below" in first.text:
            return answer(json.dumps(PLAN), plan)
        return answer("final answer", synthesis)

    return AgentConfig("lead", model="lead-model", adapter=ScriptedAdapter(script))


async def run_team(
    events: list[ProgressEvent], synthesis: tuple[int, int] = (5, 2), **budget: object
) -> TeamRunResult:
    """A plan of 10 + 4 tokens, two tasks of 1 + 1 for ``worker``, then ``synthesis``."""
    orchestrator = OpenMultiAgent(on_progress=events.append, **budget)  # type: ignore[arg-type]
    squad = Team("t", [spender("worker", (1, 1), "worker-model")])
    return await orchestrator.run_team(
        squad, "explain", coordinator=lead(plan=(10, 4), synthesis=synthesis)
    )


async def test_run_team_names_the_coordinator_when_its_plan_passed_the_token_budget() -> None:
    events: list[ProgressEvent] = []
    result = await run_team(events, max_token_budget=13)
    message = 'Agent "coordinator" exceeded token budget: 14 tokens used (budget: 13)'
    assert over(events) == ("coordinator", None, message)
    assert result.status.message == message


async def test_run_team_names_the_coordinator_when_its_plan_passed_the_cost_budget() -> None:
    def price(usage: TokenUsage, model: str) -> float:
        return float(usage.input_tokens + usage.output_tokens)

    events: list[ProgressEvent] = []
    await run_team(events, max_cost_budget=13, estimate_cost=price)
    # JavaScript writes 14.0 as 14 (and the budget 13 as 13).
    message = 'Agent "coordinator" exceeded cost budget: 14 estimated cost used (budget: 13)'
    assert over(events) == ("coordinator", None, message)


async def test_run_team_names_the_worker_task_that_passed_the_budget() -> None:
    events: list[ProgressEvent] = []
    await run_team(events, max_token_budget=17)  # 14, 16, then 18 > 17 with "Write"
    [write] = [e.task_id for e in events if isinstance(e, TaskCompleted) and e.title == "Write"]
    message = 'Agent "worker" exceeded token budget: 18 tokens used (budget: 17)'
    assert over(events) == ("worker", write, message)


async def test_run_team_names_the_coordinator_when_its_synthesis_passed_the_budget() -> None:
    # The plan and the synthesis alone (16) are within 19; the synthesis comes after the tasks
    # (18), so it is the charge that passes 19 (20), not the second task.
    events: list[ProgressEvent] = []
    await run_team(events, synthesis=(1, 1), max_token_budget=19)
    message = 'Agent "coordinator" exceeded token budget: 20 tokens used (budget: 19)'
    assert over(events) == ("coordinator", None, message)


@pytest.mark.parametrize(
    ("budget", "named"),
    [(5, ("x", "a")), (7, ("y", "b"))],  # "a" alone (6) passes 5; with "b" (12) it passes 7
)
async def test_a_restore_over_its_budget_names_the_restored_charge_that_passed_it(
    budget: int, named: tuple[str, str]
) -> None:
    store = InMemoryStore()
    squad = Team("t", [spender("x", (3, 3)), spender("y", (3, 3))])
    tasks = [Task("a", "a", id="a", assignee="x"), Task("b", "b", id="b", assignee="y")]
    checkpoint = CheckpointOptions(store=store, run_id="run-budget-event")
    fresh = await OpenMultiAgent().run_tasks(squad, tasks, checkpoint=checkpoint)
    assert fresh.success, fresh.status
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(on_progress=events.append, max_token_budget=budget)
    await orchestrator.restore(squad, checkpoint=checkpoint)
    agent, task = named
    message = f'Agent "{agent}" exceeded token budget: 12 tokens used (budget: {budget})'
    assert over(events) == (agent, task, message)


@pytest.mark.parametrize(
    ("value", "written"),
    [  # each as Node's String(number) writes it
        (0.0, "0"),
        (2.0, "2"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e-7, "1e-7"),
        (1.5e-6, "0.0000015"),
        (1e16, "10000000000000000"),
        (1.2345678901234568e20, "123456789012345680000"),
        (1e21, "1e+21"),
        (12345678.9, "12345678.9"),
    ],
)
def test_numbers_are_written_as_javascript_writes_them(value: float, written: str) -> None:
    assert js_number(value) == written

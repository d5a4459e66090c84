"""A task that finishes while a halted run drains is still charged to the run's budget.

OMA charges every result its loop drains (``recordRunUsage``, task-execution.ts 1380-1391,
whatever the loop's state), so a task still running when the gate denied a sibling's dispatch
reports the budget it passes (``budget_exceeded``). Our run keeps the halt's status and skip
reason (spec TQ-07: a forced status wins), where OMA's status becomes ``budget_exhausted``.
Before, ours did not charge a halted run's drain: the overrun was never reported.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from oma_actors import AgentConfig, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.approvals import Deny
from oma_actors.events import BudgetExceeded, ProgressEvent, TaskSkipped
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.tasks import TaskState
    from oma_actors.llm import ChatOptions, Message


class AfterDenial:
    """The writer's model: it answers, with 50 tokens, only once the gate denied ``check``."""

    def __init__(self, denied: asyncio.Event) -> None:
        self._denied = denied

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        """Wait for the denial, then answer."""
        await self._denied.wait()
        return LLMResponse([TextBlock("written")], usage=TokenUsage(40, 10))


async def test_a_task_drained_after_a_denial_reports_the_budget_it_passes() -> None:
    denied = asyncio.Event()

    def gate(task: TaskState) -> Deny | bool:
        if task.id == "check":
            denied.set()
            return Deny()
        return True

    events: list[ProgressEvent] = []
    team = Team(
        "t",
        [
            AgentConfig("writer", adapter=AfterDenial(denied)),
            AgentConfig("checker", adapter=ScriptedAdapter([])),
        ],
    )
    tasks = [
        Task("write", "w", id="write", assignee="writer"),
        Task("check", "c", id="check", assignee="checker"),
        Task("later", "l", id="later", assignee="checker", depends_on=["write"]),
    ]
    result = await OpenMultiAgent(
        on_progress=events.append, on_task_dispatch=gate, max_token_budget=30
    ).run_tasks(team, tasks)
    [over] = [event for event in events if isinstance(event, BudgetExceeded)]
    assert (over.used, over.budget, over.agent, over.task_id) == (50, 30, "writer", "write")
    # The denial's stop stands: its status, and its reason on what it skips.
    assert result.status.code == "rejected"
    assert {task.id: task.status for task in result.tasks} == {
        "write": "completed", "check": "skipped", "later": "skipped",
    }  # fmt: skip
    skipped = {event.task_id: event.reason for event in events if isinstance(event, TaskSkipped)}
    assert "budget" not in skipped["later"]

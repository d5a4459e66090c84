"""A tool-call suspension stands over a dispatch the gate denied meanwhile (``RunActor``,
``YIELDS_TO_SUSPENSION``), as in OMA: the run ends ``suspended`` and nothing is skipped.

Before, the denial's stop skipped the suspended task while its approval request stayed pending:
a reviewer could approve a call that no restore would ever resume.
"""

from __future__ import annotations

from charge_card import Charge, approve_pending, paying_agent, suspend

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
)
from oma_actors.approvals import Deny
from oma_actors.domain.tasks import TaskState
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


def _deny_check(task: TaskState) -> Deny | bool:
    return Deny() if task.id == "check" else True


async def test_a_suspended_task_is_not_skipped_by_a_denied_sibling() -> None:
    charged: list[int] = []

    async def charge(args: Charge, ctx: ToolContext) -> str:
        charged.append(args.amount)
        return "charged"

    checker = ScriptedAdapter([LLMResponse([TextBlock("checked")], usage=TokenUsage(1, 1))])
    team = Team(
        "billing",
        [
            paying_agent(execute=charge),
            AgentConfig("checker", adapter=checker),
        ],
    )
    tasks = [
        Task("pay", "charge the card", id="pay", assignee="payer"),
        Task("check", "check the books", id="check", assignee="checker"),
    ]
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="run-suspension-over-denial")
    first = await OpenMultiAgent(on_tool_call=suspend, on_task_dispatch=_deny_check).run_tasks(
        team, tasks, checkpoint=options
    )
    assert first.status.code == "suspended"
    assert {task.id: task.status for task in first.tasks} == {
        "pay": "in_progress",
        "check": "pending",
    }
    assert checker.call_count == 0
    await approve_pending(store, first)

    done = await OpenMultiAgent(on_task_dispatch=lambda task: True).restore(
        team, checkpoint=options
    )
    assert done.status.code == "ok"
    assert charged == [7]
    assert {task.id: task.status for task in done.tasks} == {
        "pay": "completed",
        "check": "completed",
    }

"""A decided request is never reported pending when the run ends (``RunActor._conclude``).

The guard: ``if request.id not in decided`` in ``RunActor._conclude``. A decided request stays
in the run's outstanding requests while the in-flight call that carries it is uncommitted
(spec SV-03, CK-16), so a run that ends before that call runs still holds it. Here a restore
already over its budget halts before it dispatches the approved task: without the filter the
result would list, as pending for a reviewer, the request that reviewer already approved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from charge_card import approve_pending, paying_agent, suspend

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
)
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence


def _auditor(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    return LLMResponse([TextBlock("audited")], usage=TokenUsage(50, 0))


async def test_an_approved_request_left_unused_by_a_halted_restore_is_not_pending() -> None:
    """Guard: ``request.id not in decided`` when ``_conclude`` lists the pending approvals."""
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="run-decided-not-pending")
    team = Team(
        "billing",
        [
            paying_agent(),
            AgentConfig("auditor", adapter=ScriptedAdapter(_auditor)),
        ],
    )
    tasks = [
        Task("pay", "charge the card", id="pay", assignee="payer"),
        Task("audit", "audit the books", id="audit", assignee="auditor"),
    ]
    first = await OpenMultiAgent(on_tool_call=suspend).run_tasks(team, tasks, checkpoint=options)
    assert first.status.code == "suspended"
    request = await approve_pending(store, first)

    # The completed audit's 50 tokens already pass the restore's budget: it halts at once.
    again = await OpenMultiAgent(max_token_budget=10).restore(team, checkpoint=options)
    assert again.status.code == "budget_exhausted"
    assert {task.id: task.status for task in again.tasks} == {
        "pay": "skipped",
        "audit": "completed",
    }
    assert [decision.request_id for decision in again.approval_decisions] == [request.id]
    assert again.pending_approvals == []

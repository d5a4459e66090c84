"""An approved dispatch request is used up when its task starts (``RunActor._dispatch``, AP-34).

The guard: ``if consumed is not None and self._pending.pop(consumed, None) is not None`` takes
the request the gate's ``Go`` consumed out of the run's pending approvals (and journals
``ApprovalUsedUp``). Without it, every later snapshot of the restored run still lists the
request as pending, although its task was dispatched and completed: the checkpoint would offer a
reviewer, and the next restore, a request that no longer gates anything.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from charge_card import approve_pending

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.approvals import Suspend
from oma_actors.checkpoint import checkpoint_key
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence

RUN = "run-dispatch-used-up"


def _reply(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    return LLMResponse([TextBlock("summary")], usage=TokenUsage(1, 1))


async def test_a_consumed_dispatch_approval_leaves_the_saved_pending_approvals() -> None:
    """Guard: ``self._pending.pop(consumed, None)`` when the dispatch gate answers ``Go``."""
    store = InMemoryStore()
    worker = ScriptedAdapter(_reply)
    team = Team("t", [AgentConfig("worker", adapter=worker)])
    options = CheckpointOptions(store=store, run_id=RUN)
    tasks = [Task("report", "Summarise."), Task("check", "Check it.", depends_on=["report"])]

    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend("review")).run_tasks(
        team, tasks, checkpoint=options
    )
    assert first.status.code == "suspended"
    assert worker.call_count == 0
    request = await approve_pending(store, first)

    done = await OpenMultiAgent(on_task_dispatch=lambda task: True).restore(
        team, checkpoint=options
    )
    assert done.status.code == "ok"
    assert done.pending_approvals == []
    assert worker.call_count == 2  # each task ran once
    stored = await store.get(checkpoint_key(RUN))
    assert stored is not None
    saved = json.loads(stored.value)
    assert saved["pendingApprovals"] == []  # used up by the dispatch it approved
    assert [d["requestId"] for d in saved["approvalDecisions"]] == [request.id]

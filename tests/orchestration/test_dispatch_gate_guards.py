"""A dispatch suspension is reported only once it is durable (``DispatchGate.check``, AP-19/AP-21).

The guard: when ``publish`` cannot checkpoint the suspension (a strict save at
``approval_requested``), the gate answers a callback error instead of ``Wait``. Without it the
run would report ``suspended`` although no checkpoint and no ledger row hold the request: a
reviewer could never find it, and no restore would know about it.
"""

from __future__ import annotations

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.approvals import APPROVAL_KEY_PREFIX, Suspend
from oma_actors.events import ApprovalPending, CheckpointSaveFailed, ProgressEvent
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FailingStore, ScriptedAdapter


async def test_a_dispatch_suspension_that_cannot_be_saved_is_an_error_not_a_suspension() -> None:
    """Guard: ``if not await publish(...)`` in ``DispatchGate.check`` (the ``Suspend`` case)."""
    inner = InMemoryStore()
    disk_full = FailingStore(inner, times=None, exc_factory=lambda: OSError(28, "No space left"))
    worker = ScriptedAdapter([LLMResponse([TextBlock("never")], usage=TokenUsage(1, 1))])
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(
        on_task_dispatch=lambda task: Suspend("review"), on_progress=events.append
    ).run_tasks(
        Team("t", [AgentConfig("worker", adapter=worker)]),
        [Task("report", "Summarise the figures.")],
        checkpoint=CheckpointOptions(store=disk_full, run_id="run-dispatch-guard"),
    )
    assert result.status.code == "error"
    assert result.status.message is not None
    assert "APPROVAL_INTEGRITY_ERROR: the suspension could not be checkpointed" in (
        result.status.message
    )
    assert result.pending_approvals == []
    assert [task.status for task in result.tasks] == ["skipped"]
    assert worker.call_count == 0
    assert not any(isinstance(event, ApprovalPending) for event in events)
    strict = [e.boundary for e in events if isinstance(e, CheckpointSaveFailed) and e.strict]
    assert strict == ["approval_requested"]
    # No ledger row: a reviewer never sees a request that no checkpoint would resume.
    assert [e.key for e in await inner.list() if e.key.startswith(APPROVAL_KEY_PREFIX)] == []

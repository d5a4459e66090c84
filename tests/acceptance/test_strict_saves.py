"""Strict saves fail closed: a suspension or a rejection is never reported without durable state."""

from __future__ import annotations

import json

import pytest
from acceptance_helpers import answer
from approvals_flow_helpers import options, reject, worker_team

from oma_actors import AgentConfig, OpenMultiAgent, StoreError, Task
from oma_actors.approvals import APPROVAL_KEY_PREFIX, Suspend
from oma_actors.checkpoint import Checkpoint
from oma_actors.events import ApprovalPending, CheckpointSaveFailed, ProgressEvent
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FailingStore, ScriptedAdapter

PLAN = json.dumps([{"title": "Research", "description": "find facts", "assignee": "worker"}])


def disk_full(inner: InMemoryStore) -> FailingStore:
    """Every checkpoint write fails; the ledger's rows still land."""
    return FailingStore(inner, times=None, exc_factory=lambda: OSError(28, "No space left"))


async def test_a_plan_suspension_that_cannot_be_saved_is_an_error_and_announces_nothing() -> None:
    inner = InMemoryStore()
    events: list[ProgressEvent] = []
    lead = ScriptedAdapter([answer(PLAN)])
    result = await OpenMultiAgent(
        on_plan_ready=lambda tasks: Suspend("review"), on_progress=events.append
    ).run_team(
        worker_team(ScriptedAdapter([answer("facts")])), "goal",
        coordinator=AgentConfig("coordinator", adapter=lead), checkpoint=options(disk_full(inner)),
    )  # fmt: skip
    assert result.status.code == "error"
    assert result.status.message.startswith("APPROVAL_INTEGRITY_ERROR: the plan suspension")
    assert "No space left" in result.status.message
    assert not any(isinstance(e, ApprovalPending) for e in events)
    failed = [e for e in events if isinstance(e, CheckpointSaveFailed)]
    assert [(e.boundary, e.strict) for e in failed] == [("plan_suspended", True)]
    # No ledger row: a reviewer never sees a request that no checkpoint would resume.
    assert [e.key for e in await inner.list() if e.key.startswith(APPROVAL_KEY_PREFIX)] == []


async def test_a_rejection_that_cannot_be_saved_raises_and_keeps_the_suspended_snapshot() -> None:
    inner = InMemoryStore()
    adapter = ScriptedAdapter([answer("never")])
    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
        worker_team(adapter), [Task("a", "x")], checkpoint=options(inner)
    )
    [request] = first.pending_approvals
    await reject(inner, request.id, request.request_hash)
    before = await Checkpoint(inner, run_id="run-approvals").load_latest()
    assert before is not None

    with pytest.raises(StoreError, match="approval rejection could not be saved"):
        await OpenMultiAgent(on_task_dispatch=lambda task: True).restore(
            worker_team(adapter), checkpoint=options(disk_full(inner))
        )
    after = await Checkpoint(inner, run_id="run-approvals").load_latest()
    assert after == before  # nothing durable was lost or overwritten

    result = await OpenMultiAgent(on_task_dispatch=lambda task: True).restore(
        worker_team(adapter), checkpoint=options(inner)
    )
    assert result.status.code == "rejected"
    stored = await Checkpoint(inner, run_id="run-approvals").load_latest()
    assert stored is not None
    assert stored.revision == before.revision + 1
    assert adapter.call_count == 0

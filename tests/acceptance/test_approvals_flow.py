"""Durable approvals end to end: task dispatch and plan gates, suspension, restore (spec 13)."""

from __future__ import annotations

import json

import pytest
from acceptance_helpers import answer
from approvals_flow_helpers import RUN, approve, never, options, reject, worker_team

from oma_actors import AgentConfig, OpenMultiAgent, Task, Team
from oma_actors.approvals import Allow, Deny, Suspend, get_approval_record
from oma_actors.checkpoint import checkpoint_key
from oma_actors.events import ApprovalPending, ProgressEvent
from oma_actors.stores import InMemoryStore, RedactingStore
from oma_actors.testing import ScriptedAdapter

# -- task dispatch --------------------------------------------------------------------------------


async def test_t34_suspend_without_compare_and_set_fails_closed() -> None:
    inner = InMemoryStore()
    adapter = ScriptedAdapter([answer("done")])
    result = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend("review")).run_tasks(
        worker_team(adapter), [Task("a", "x")], checkpoint=options(RedactingStore(inner))
    )
    assert not result.success
    assert result.status.code == "error"
    assert "APPROVAL_ATOMIC_STORE_REQUIRED" in (result.status.message or "")
    assert result.pending_approvals == []
    assert adapter.call_count == 0
    assert not [e.key for e in await inner.list() if e.key.startswith("__oma_approval__/")]


@pytest.mark.parametrize("where", ["no checkpoint", "a store without compare_and_set"])
async def test_a_plan_suspension_without_compare_and_set_fails_closed(where: str) -> None:
    inner = InMemoryStore()
    workers = ScriptedAdapter([answer("facts")])
    checkpoint = None if where == "no checkpoint" else options(RedactingStore(inner))
    result = await OpenMultiAgent(on_plan_ready=lambda tasks: Suspend("review")).run_team(
        worker_team(workers), "goal",
        coordinator=AgentConfig("coordinator", adapter=ScriptedAdapter([answer(PLAN)])),
        checkpoint=checkpoint,
    )  # fmt: skip
    assert (result.success, result.status.code) == (False, "error")
    assert "APPROVAL_ATOMIC_STORE_REQUIRED" in (result.status.message or "")
    assert result.pending_approvals == []
    assert workers.call_count == 0  # the plan never ran
    assert not [e.key for e in await inner.list() if e.key.startswith("__oma_approval__/")]


async def test_t38_dispatch_suspend_approve_restore_runs_once_without_asking_again() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter([answer("done")])
    events: list[ProgressEvent] = []
    first = await OpenMultiAgent(
        on_task_dispatch=lambda task: Suspend("needs a human"), on_progress=events.append
    ).run_tasks(worker_team(adapter), [Task("a", "x")], checkpoint=options(store))
    assert first.status.code == "suspended"
    assert not first.success
    [request] = first.pending_approvals
    assert request.scope == "task_dispatch"
    assert request.reason == "needs a human"
    assert adapter.call_count == 0
    assert [type(e).__name__ for e in events if isinstance(e, ApprovalPending)] == [
        "ApprovalPending"
    ]
    assert first.tasks[0].status == "pending"

    # Restoring before anyone decided does nothing at all, however often.
    for _ in range(2):
        waiting = await OpenMultiAgent(on_task_dispatch=never).restore(
            worker_team(adapter), checkpoint=options(store)
        )
        assert waiting.status.code == "suspended"
        assert [r.id for r in waiting.pending_approvals] == [request.id]
    assert adapter.call_count == 0

    await approve(store, request.id, request.request_hash)
    done = await OpenMultiAgent(on_task_dispatch=lambda task: False).restore(
        worker_team(adapter), checkpoint=options(store)
    )
    assert done.success, done.status
    assert [t.status for t in done.tasks] == ["completed"]
    assert adapter.call_count == 1
    assert [d.decision for d in done.approval_decisions] == ["approved"]
    assert done.pending_approvals == []


async def test_an_approved_dispatch_restored_without_a_gate_runs_the_rest_ungated() -> None:
    # The restore names no dispatch gate: the approved task runs once on its decision, and a
    # task nobody gated is dispatched as any task of a run without gates is.
    store = InMemoryStore()
    adapter = ScriptedAdapter([answer("one"), answer("two")])
    first = await OpenMultiAgent(
        on_task_dispatch=lambda task: Suspend() if task.title == "a" else True
    ).run_tasks(
        worker_team(adapter), [Task("a", "x"), Task("b", "y", depends_on=["a"])],
        checkpoint=options(store),
    )  # fmt: skip
    [request] = first.pending_approvals
    await approve(store, request.id, request.request_hash)
    done = await OpenMultiAgent().restore(worker_team(adapter), checkpoint=options(store))
    assert done.success, done.status
    assert [t.status for t in done.tasks] == ["completed", "completed"]
    assert adapter.call_count == 2


async def test_t39_rejected_dispatch_is_terminal_across_restores() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter([answer("never")])
    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
        worker_team(adapter), [Task("a", "x")], checkpoint=options(store)
    )
    [request] = first.pending_approvals
    await reject(store, request.id, request.request_hash)
    for _ in range(2):
        result = await OpenMultiAgent(on_task_dispatch=lambda task: True).restore(
            worker_team(adapter), checkpoint=options(store)
        )
        assert result.status.code == "rejected"
        assert [t.status for t in result.tasks] == ["skipped"]
    assert adapter.call_count == 0


async def test_dispatch_deny_and_gate_error_skip_the_rest() -> None:
    adapter = ScriptedAdapter([answer("a done")])
    tasks = [Task("a", "x"), Task("b", "y", depends_on=["a"])]
    denied = await OpenMultiAgent(
        on_task_dispatch=lambda task: Deny("no") if task.title == "b" else Allow()
    ).run_tasks(worker_team(adapter), tasks)
    assert denied.status.code == "rejected"
    assert [t.status for t in denied.tasks] == ["completed", "skipped"]
    assert denied.tasks[1].result == "Skipped: task dispatch approval rejected."

    def broken(task: object) -> bool:
        raise RuntimeError("gate bug")

    errored = await OpenMultiAgent(on_task_dispatch=broken).run_tasks(
        worker_team(ScriptedAdapter([])), [Task("a", "x")]
    )
    assert errored.status.code == "error"
    assert "gate bug" in (errored.tasks[0].result or "")


# -- plan -----------------------------------------------------------------------------------------

PLAN = json.dumps([{"title": "Research", "description": "find", "assignee": "worker"}])


async def test_t35_plan_suspend_approve_restore_runs_and_synthesizes() -> None:
    store = InMemoryStore()
    workers = ScriptedAdapter([answer("facts")])
    lead = ScriptedAdapter([answer(PLAN)])
    first = await OpenMultiAgent(on_plan_ready=lambda tasks: Suspend("Human review")).run_team(
        worker_team(workers), "goal", coordinator=AgentConfig("coordinator", adapter=lead),
        checkpoint=options(store),
    )  # fmt: skip
    assert first.status.code == "suspended"
    [request] = first.pending_approvals
    assert (request.scope, request.content["kind"], request.content["continuation"]) == (
        "plan", "plan", "execute",
    )  # fmt: skip
    assert request.reason == "Human review"
    assert workers.call_count == 0
    await approve(store, request.id, request.request_hash)

    synth = ScriptedAdapter([answer("SYNTHESIZED")])
    result = await OpenMultiAgent(on_plan_ready=never).restore(
        worker_team(workers), checkpoint=options(store),
        coordinator=AgentConfig("coordinator", adapter=synth),
    )  # fmt: skip
    assert result.success, result.status
    assert [(t.title, t.status) for t in result.tasks] == [("Research", "completed")]
    assert result.agent_results["coordinator"].output == "SYNTHESIZED"
    assert result.approval_decisions[0].reviewer.id == "reviewer-1"
    assert (workers.call_count, synth.call_count, lead.call_count) == (1, 1, 1)


async def test_t36_approved_plan_only_restores_to_the_plan_every_time() -> None:
    store = InMemoryStore()
    workers = ScriptedAdapter([])
    lead = ScriptedAdapter([answer(PLAN)])
    first = await OpenMultiAgent(on_plan_ready=lambda tasks: Suspend()).run_team(
        worker_team(workers), "goal", coordinator=AgentConfig("coordinator", adapter=lead),
        checkpoint=options(store), plan_only=True,
    )  # fmt: skip
    [request] = first.pending_approvals
    assert request.content["continuation"] == "plan_only"
    await approve(store, request.id, request.request_hash)
    for _ in range(2):
        result = await OpenMultiAgent(on_plan_ready=never).restore(
            worker_team(workers), checkpoint=options(store)
        )
        assert (result.success, result.plan_only, result.status.code) == (True, True, "ok")
        assert [t.status for t in result.tasks] == ["pending"]
    assert workers.call_count == 0


async def test_plan_deny_runs_nothing() -> None:
    workers = ScriptedAdapter([])
    result = await OpenMultiAgent(on_plan_ready=lambda tasks: False).run_team(
        worker_team(workers), "goal",
        coordinator=AgentConfig("coordinator", adapter=ScriptedAdapter([answer(PLAN)])),
    )  # fmt: skip
    assert result.status.code == "rejected"
    assert workers.call_count == 0


async def test_ledger_row_matches_the_checkpoint_request() -> None:
    store = InMemoryStore()
    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
        worker_team(ScriptedAdapter([])), [Task("a", "x")], checkpoint=options(store)
    )
    [request] = first.pending_approvals
    record = await get_approval_record(store, request.id)
    assert record is not None
    assert record.request == request
    assert record.decision is None


async def test_a_rejection_keeps_the_embedded_shared_memory() -> None:
    shared, store = InMemoryStore(), InMemoryStore()
    await shared.set("seed/note", "keep me", {"agent": "seed"})
    adapter = ScriptedAdapter([])
    team = Team("t", [AgentConfig("worker", adapter=adapter)], shared_memory_store=shared)
    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
        team, [Task("a", "x")], checkpoint=options(store)
    )
    [request] = first.pending_approvals
    await reject(store, request.id, request.request_hash)
    result = await OpenMultiAgent().restore(team, checkpoint=options(store))
    assert result.status.code == "rejected"
    saved = json.loads((await store.get(checkpoint_key(RUN))).value)  # type: ignore[union-attr]
    assert [e["key"] for e in saved["sharedMemory"]["entries"]] == ["seed/note"]
    assert saved["identity"]["attempt"] == 2
    assert [d["decision"] for d in saved["approvalDecisions"]] == ["rejected"]
    assert saved["pendingApprovals"] == []

"""The restore-time checks of durable approvals (AP-28..AP-31), each with the checkpoint edited.

A restore recomputes each pending request from the checkpoint and checks it against the ledger
before any approved work goes on. Each test here edits one thing the reviewer did not see (a
request's boundary, its scope, the task it names) in the stored checkpoint, or moves the
checkpoint to a store that cannot hold a ledger, and checks that the restore refuses it, naming
the request, before a model is called. The complementary content edits are in
``test_approvals_integrity.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from acceptance_helpers import answer, calls
from approvals_flow_helpers import RUN, approve, options, worker_team
from pydantic import BaseModel

from oma_actors import AgentConfig, DurableApprovalError, OpenMultiAgent, Task, define_tool
from oma_actors.approvals import Suspend, approval_request_id, hash_approval_request
from oma_actors.checkpoint import checkpoint_key
from oma_actors.stores import InMemoryStore
from oma_actors.testing import MinimalStore, ScriptedAdapter

INTEGRITY = "APPROVAL_INTEGRITY_ERROR"
STALE = "APPROVAL_STALE_DECISION"
PLAN = json.dumps([{"title": "Research", "description": "find", "assignee": "worker"}])


async def edit_checkpoint(store: InMemoryStore, edit: Any) -> None:
    """Apply ``edit`` to the stored checkpoint's JSON document."""
    key = checkpoint_key(RUN)
    entry = await store.get(key)
    assert entry is not None
    raw = json.loads(entry.value)
    edit(raw)
    await store.set(key, json.dumps(raw))


async def suspended_on(scope: str, store: InMemoryStore) -> ScriptedAdapter:
    """A run suspended on one approval request of ``scope``, approved since; its adapter."""
    adapter = ScriptedAdapter([answer("done")])
    if scope == "plan":
        first = await OpenMultiAgent(on_plan_ready=lambda tasks: Suspend()).run_team(
            worker_team(adapter), "goal",
            coordinator=AgentConfig("coordinator", adapter=ScriptedAdapter([answer(PLAN)])),
            checkpoint=options(store),
        )  # fmt: skip
    elif scope == "task_dispatch":
        first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
            worker_team(adapter), [Task("report", "Summarise the figures.")],
            checkpoint=options(store),
        )  # fmt: skip
    else:
        adapter = ScriptedAdapter(
            lambda messages, _: (
                answer("after") if len(messages) > 1 else calls(("call-1", "noop", {}))
            )
        )
        first = await OpenMultiAgent(on_tool_call=lambda call: Suspend()).run_tasks(
            worker_team(adapter, tools=[noop_tool()]), [Task("pay", "pay it")],
            checkpoint=options(store),
        )  # fmt: skip
    [request] = first.pending_approvals
    assert request.scope == scope
    await approve(store, request.id, request.request_hash)
    return adapter


class Nothing(BaseModel):
    """The input of the ``noop`` tool."""


async def must_not_run(args: BaseModel, ctx: object) -> str:
    raise AssertionError("an edited approval must not run the call")


def noop_tool(execute: Any = must_not_run) -> Any:
    return define_tool(name="noop", description="noop", input_model=Nothing, execute=execute)


async def refused(store: Any, adapter: ScriptedAdapter, scope: str) -> DurableApprovalError:
    calls_before = adapter.call_count
    tools = [noop_tool()] if scope == "tool_call" else []
    with pytest.raises(DurableApprovalError) as caught:
        await OpenMultiAgent().restore(
            worker_team(adapter, tools=tools), checkpoint=options(store),
            coordinator=AgentConfig("coordinator", adapter=ScriptedAdapter([])),
        )  # fmt: skip
    assert adapter.call_count == calls_before  # refused before any model call
    return caught.value


def moved_to(boundary: str) -> Any:
    """An edit moving the pending request to ``boundary``, its hash recomputed to match (a
    consistent forgery: the checkpoint's own hash check passes, the restore's must not)."""

    def edit(raw: dict[str, Any]) -> None:
        [request] = raw["pendingApprovals"]
        old = dict(request)
        request["boundary"] = boundary
        request["requestHash"] = hash_approval_request(
            request["scope"], boundary, request["content"]
        )
        request["id"] = approval_request_id(
            request["runId"], request["scope"], boundary, request["requestHash"]
        )
        replace_everywhere(raw, old, request)  # an in-flight call carries its request too

    return edit


def replace_everywhere(node: Any, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Replace every copy of ``old`` inside ``node`` (in place) by ``new``."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in list(items):
        if value == old:
            node[key] = dict(new)
        elif isinstance(value, dict | list):
            replace_everywhere(value, old, new)


@pytest.mark.parametrize(
    ("scope", "edit", "code", "named"),
    [
        ("plan", moved_to("task:t1"), INTEGRITY, "has a foreign boundary"),
        ("tool_call", moved_to("tool_call:pay:call-9"), STALE,
         "no longer identifies the pending invocation"),
        ("task_dispatch", lambda raw: raw["queue"]["tasks"][0].update(id="renamed"), STALE,
         "no longer identifies a pending task"),
    ],
)  # fmt: skip
async def test_a_request_the_checkpoint_no_longer_identifies_is_refused(
    scope: str, edit: Any, code: str, named: str
) -> None:
    store = InMemoryStore()
    adapter = await suspended_on(scope, store)
    await edit_checkpoint(store, edit)
    error = await refused(store, adapter, scope)
    assert error.code == code
    assert re.search(rf"request apr_\w+ {named}", str(error)), error


async def test_approvals_kept_on_a_store_that_cannot_hold_a_ledger_are_refused() -> None:
    store = InMemoryStore()
    adapter = await suspended_on("task_dispatch", store)
    plain = MinimalStore()
    entry = await store.get(checkpoint_key(RUN))
    assert entry is not None
    await plain.set(checkpoint_key(RUN), entry.value)
    error = await refused(plain, adapter, "task_dispatch")
    assert error.code == "APPROVAL_ATOMIC_STORE_REQUIRED"


async def test_a_run_without_approvals_restores_on_a_store_that_cannot_hold_a_ledger() -> None:
    # Its checkpoint copied mid-run (at its tool call) to a plain store: nothing to reconcile.
    store, plain = InMemoryStore(), MinimalStore()

    async def copy_checkpoint(args: object, ctx: object) -> str:
        entry = await store.get(checkpoint_key(RUN))
        assert entry is not None
        await plain.set(checkpoint_key(RUN), entry.value)
        return "copied"

    tool = noop_tool(copy_checkpoint)
    adapter = ScriptedAdapter(
        lambda messages, _: answer("after") if len(messages) > 1 else calls(("c1", "noop", {}))
    )
    first = await OpenMultiAgent().run_tasks(
        worker_team(adapter, tools=[tool]), [Task("t", "go")], checkpoint=options(store)
    )
    assert first.success
    result = await OpenMultiAgent().restore(
        worker_team(adapter, tools=[tool]), checkpoint=options(plain)
    )
    assert result.success, result.status


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("reviewer", {"id": "mallory"}),
        ("decidedAt", "2020-01-01T00:00:00.000Z"),
        ("requestId", "apr_00000000000000000000000000000000"),  # a decision the ledger lacks
        ("decision", "rejected"),
        ("requestHash", "0" * 64),
        ("scope", "plan"),
    ],
)
async def test_a_recorded_decision_the_ledger_does_not_hold_is_refused(
    field: str, value: object
) -> None:
    # Task a's dispatch was approved and used; the run now waits on task b's. The checkpoint
    # keeps a's decision, which must be the ledger's own, field for field.
    store = InMemoryStore()
    adapter = ScriptedAdapter([answer("one"), answer("two")])
    gate = OpenMultiAgent(on_task_dispatch=lambda task: Suspend())
    tasks = [Task("a", "x"), Task("b", "y", depends_on=["a"])]
    first = await gate.run_tasks(worker_team(adapter), tasks, checkpoint=options(store))
    [request] = first.pending_approvals
    await approve(store, request.id, request.request_hash)
    second = await gate.restore(worker_team(adapter), checkpoint=options(store))
    assert second.status.code == "suspended"
    [decision] = second.approval_decisions
    assert decision.request_id == request.id

    def edit(raw: dict[str, Any]) -> None:
        [recorded] = raw["approvalDecisions"]
        recorded[field] = value

    await edit_checkpoint(store, edit)
    error = await refused(store, adapter, "task_dispatch")
    assert error.code == INTEGRITY
    assert "does not match the primary ledger" in str(error)


async def test_an_approved_plan_only_checkpoint_without_its_goal_is_refused() -> None:
    store = InMemoryStore()
    workers = ScriptedAdapter([])
    first = await OpenMultiAgent(on_plan_ready=lambda tasks: Suspend()).run_team(
        worker_team(workers), "goal", plan_only=True,
        coordinator=AgentConfig("coordinator", adapter=ScriptedAdapter([answer(PLAN)])),
        checkpoint=options(store),
    )  # fmt: skip
    [request] = first.pending_approvals
    assert request.content["continuation"] == "plan_only"
    await approve(store, request.id, request.request_hash)
    await edit_checkpoint(store, lambda raw: raw.pop("goal"))
    error = await refused(store, workers, "plan")
    assert error.code == INTEGRITY
    assert "an approved plan-only checkpoint has no goal" in str(error)

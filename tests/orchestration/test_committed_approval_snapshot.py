"""The snapshot saved after an approved call commits lists its request no more (AP-34).

The guard: ``if item.approval_request is not None and item.commit is None`` in
``RunActor._pending_requests``: an in-flight call carries its request into the snapshot's
``pendingApprovals`` only while it is uncommitted (spec SV-03, AP-34). Without ``commit is
None``, the ``tool_commit`` snapshot of the approved call, the one a crash before the results
message restores from, still lists the request the call used up, so that restore would offer a
reviewer, and report as pending, an approval whose call already ran.
"""

from __future__ import annotations

import json
from typing import Any

from charge_card import Charge, approve_pending, paying_agent, suspend

from oma_actors import (
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    ToolContext,
)
from oma_actors.checkpoint import checkpoint_key
from oma_actors.stores import InMemoryStore

RUN = "run-committed-approval"
KEY = checkpoint_key(RUN)


class Snapshots(InMemoryStore):
    """An in-memory store that keeps every checkpoint snapshot written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[dict[str, Any]] = []

    async def set(self, key: str, value: str, metadata: Any = None) -> None:
        await super().set(key, value, metadata)
        if key == KEY:
            self.saved.append(json.loads(value))


async def test_the_commit_snapshot_of_an_approved_call_lists_no_pending_request() -> None:
    """Guard: ``item.commit is None`` in ``RunActor._pending_requests``."""
    executions: list[int] = []

    async def charge(args: Charge, ctx: ToolContext) -> str:
        executions.append(args.amount)
        return "charged"

    team = Team("t", [paying_agent(execute=charge)])
    store = Snapshots()
    options = CheckpointOptions(store=store, run_id=RUN)
    first = await OpenMultiAgent(on_tool_call=suspend).run_tasks(
        team, [Task("pay", "pay it", id="pay", assignee="payer")], checkpoint=options
    )
    await approve_pending(store, first)
    store.saved.clear()
    done = await OpenMultiAgent().restore(team, checkpoint=options)
    assert done.success
    assert executions == [7]
    committed = [
        snap
        for snap in store.saved
        for task in snap["inFlightTasks"]
        if any("commit" in item for item in task.get("pendingToolCalls", []))
    ]
    assert committed  # the tool_commit snapshot, written before the results message
    for snap in committed:
        assert snap["pendingApprovals"] == []

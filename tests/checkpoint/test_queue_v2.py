"""OMA's queue v2 (plan revisions, spec TQ-11..TQ-14) read, restored and written back as v2.

The source is the TypeScript OMA's own queue v2 checkpoint: ``first`` failed and was recovered by
plan revision 1, which superseded ``second`` and appended ``repair`` -> ``second-v2``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from oma_fixtures import scenario, stored_value

from oma_actors import AgentConfig, Team
from oma_actors.checkpoint import CheckpointSnapshot, decode, encode
from oma_actors.domain.tasks import PlanRevision, QueuePlan
from oma_actors.errors import CheckpointError
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.restore_plan import plan_restore

NAME = "queue-v2-plan-revisions"
TEAM = Team("fixture-team", [AgentConfig("worker")])
Raw = dict[str, Any]


def _raw() -> Raw:
    value: Raw = json.loads(stored_value(NAME))
    return value


def _decoded(raw: Raw | None = None) -> CheckpointSnapshot:
    return decode(json.dumps(raw if raw is not None else _raw()), key="k")


def _ids() -> dict[str, str]:
    ids: dict[str, str] = scenario(NAME)["taskIds"]
    return ids


def test_the_plan_revision_history_is_typed() -> None:
    snapshot = _decoded()
    ids = _ids()
    (revision,) = snapshot.plan.revisions
    assert snapshot.plan.revision == 1
    assert revision == PlanRevision(
        id="6f0c1f02-a7de-44fe-b495-8f56d28ed1f7",
        version=1,
        trigger_task_id=ids["first"],
        trigger="failure",
        reason="first failed; replace second",
        added_tasks={"repair": ids["repair"], "second-v2": ids["second-v2"]},
        retargeted_tasks=(),
        superseded_task_ids=(ids["second"],),
        created_at="2026-12-01T10:48:14.730Z",
    )
    by_title = {task.title: task for task in snapshot.tasks}
    assert by_title["first"].recovered_by_revision == 1
    assert by_title["second"].superseded_by_revision == 1
    assert by_title["repair"].recovered_by_revision is None


def test_queue_v2_is_written_as_v2_and_v1_as_v1() -> None:
    raw = _raw()
    assert json.loads(encode(_decoded()))["queue"] == raw["queue"]
    fixed = json.loads(encode(replace(_decoded(), plan=QueuePlan())))["queue"]
    assert fixed["version"] == 1
    assert "planRevision" not in fixed
    assert "planRevisions" not in fixed


def test_unknown_members_of_a_revision_are_written_back() -> None:
    raw = _raw()
    raw["queue"]["planRevisions"][0]["approvedBy"] = "ops"
    assert json.loads(encode(_decoded(raw)))["queue"]["planRevisions"][0]["approvedBy"] == "ops"


def test_a_malformed_revision_is_refused() -> None:
    raw = _raw()
    raw["queue"]["planRevisions"][0]["retargetedTasks"] = ["not-an-object"]
    with pytest.raises(CheckpointError, match="malformed task references"):
        _decoded(raw)


def test_a_recovered_failure_does_not_fail_the_run() -> None:
    """Spec TQ-07: only failures no plan revision recovered count against the run."""
    snapshot = _decoded()
    queue = TaskQueue(snapshot.tasks, plan=snapshot.plan)
    assert [task.title for task in queue.with_status("failed")] == ["first"]
    assert queue.failures() == []
    repair = next(task for task in snapshot.tasks if task.title == "repair")
    queue.fail(repair.id, "broke")
    assert [task.title for task in queue.failures()] == ["repair", "second-v2"]  # cascaded


def test_transitions_keep_the_revision_fields_and_extras() -> None:
    raw = _raw()
    raw["queue"]["tasks"][3]["role"] = "fixer"
    snapshot = _decoded(raw)
    queue = TaskQueue(snapshot.tasks, plan=snapshot.plan)
    later = snapshot.tasks[3]
    queue.start(later.id, "worker")
    queue.complete(later.id, "done")
    assert queue.get(later.id).extra == {"role": "fixer"}
    assert queue.get(snapshot.tasks[0].id).recovered_by_revision == 1
    assert queue.plan == snapshot.plan


def test_restore_carries_the_plan_into_the_queue() -> None:
    snapshot = _decoded()
    plan = plan_restore(snapshot, TEAM, None)
    assert plan.queue.plan == snapshot.plan
    assert [task.title for task in plan.queue.ready()] == ["second-v2"]


def _broken(change: str) -> Raw:
    raw = _raw()
    queue = raw["queue"]
    revision = queue["planRevisions"][0]
    if change == "count":
        queue["planRevision"] = 2
    elif change == "zero":
        queue["planRevision"] = 0
    elif change == "version":
        revision["version"] = 2
    elif change == "trigger":
        revision["triggerTaskId"] = "nope"
    elif change == "added":
        revision["addedTasks"]["ghost"] = "nope"
    elif change == "retargeted":
        revision["retargetedTasks"] = [{"taskId": "nope", "assignee": "worker"}]
    elif change == "superseded":
        revision["supersededTaskIds"].append("nope")
    return raw


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("count", "invalid plan revision sequence"),
        ("zero", "invalid plan revision sequence"),
        ("version", "invalid plan revision history"),
        ("trigger", "invalid plan revision history"),
        ("added", "references an unknown task: nope"),
        ("retargeted", "references an unknown task: nope"),
        ("superseded", "references an unknown task: nope"),
    ],
)
def test_restore_refuses_an_inconsistent_plan_history(change: str, message: str) -> None:
    """Spec TQ-13: OMA's fromSnapshot refuses these before any work; so do we."""
    snapshot = _decoded(_broken(change))  # the load-time validator does not look (CK-18)
    with pytest.raises(CheckpointError, match=message):
        plan_restore(snapshot, TEAM, None)

"""JSON forms of the queue's values: OMA's ``TaskSnapshot`` and queue v2 plan revisions (TQ-11).

Members OMA writes that the typed values do not model are kept on the value (``extra``) and
written back unchanged, so restoring and re-saving an OMA checkpoint loses none of them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors.clock import SYSTEM_CLOCK, from_iso, to_iso
from oma_actors.domain.metadata import check_task_metadata
from oma_actors.domain.tasks import PlanRevision, QueuePlan, TaskState
from oma_actors.errors import CheckpointError, TaskGraphError

if TYPE_CHECKING:
    from datetime import datetime

    from oma_actors.clock import Clock

Json = dict[str, Any]


def task_to_json(task: TaskState) -> Json:
    """OMA's ``TaskSnapshot`` (TQ-12); optional fields omitted when empty."""
    out: Json = {
        "id": task.id,
        "title": task.title,
        "description": task.description,
        "status": task.status,
    }
    if task.assignee is not None:
        out["assignee"] = task.assignee
    if task.depends_on:
        out["dependsOn"] = list(task.depends_on)
    if task.metadata is not None:
        out["metadata"] = dict(task.metadata)
    if task.result is not None:
        out["result"] = task.result
    out["createdAt"] = to_iso(task.created_at)
    out["updatedAt"] = to_iso(task.updated_at)
    if task.max_retries:
        out["maxRetries"] = task.max_retries
    # As OMA's taskToSnapshot: each only when the task set it (a dispatch approval hashes the
    # snapshot: an OMA row must match the task as we write it back).
    if task.retry_delay_ms is not None:
        out["retryDelayMs"] = task.retry_delay_ms
    if task.retry_backoff is not None:
        out["retryBackoff"] = task.retry_backoff
    if task.superseded_by_revision is not None:
        out["supersededByRevision"] = task.superseded_by_revision
    if task.recovered_by_revision is not None:
        out["recoveredByRevision"] = task.recovered_by_revision
    for key, value in (task.extra or {}).items():
        out.setdefault(key, value)
    return out


def _metadata(raw: Json) -> Any:
    try:
        return check_task_metadata(raw.get("metadata"), task_id=raw["id"])
    except TaskGraphError as exc:
        raise CheckpointError(f"restored {exc}") from None


def _moment(raw: Any, clock: Clock) -> datetime:
    # TQ-12: an unparseable date becomes "now" rather than failing the restore.
    try:
        return from_iso(str(raw))
    except ValueError:
        return clock.now()


def task_from_json(raw: Any, *, clock: Clock = SYSTEM_CLOCK) -> TaskState:
    """Parse a task snapshot; a missing or unparseable time becomes ``clock.now()`` (spec TQ-12).

    Args:
        raw: the task's JSON object.
        clock: the time source for dates that cannot be parsed (a restore never fails on one).

    Raises:
        CheckpointError: ``raw`` is not an object with an ``id``, its status is unknown, or its
            metadata breaks the task metadata rules (spec TQ-12 re-validates it on restore).
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise CheckpointError(f"queue task is not an object with an id: {raw!r}"[:200])
    status = raw.get("status")
    if status not in ("pending", "blocked", "in_progress", "completed", "failed", "skipped"):
        raise CheckpointError(f"task {raw['id']!r} has unknown status {status!r}")
    typed = TaskState(
        id=raw["id"],
        title=str(raw.get("title", "")),
        description=str(raw.get("description", "")),
        status=status,
        assignee=raw.get("assignee"),
        depends_on=tuple(raw.get("dependsOn") or ()),
        result=raw.get("result"),
        max_retries=int(raw.get("maxRetries", 0)),
        retry_delay_ms=None if raw.get("retryDelayMs") is None else int(raw["retryDelayMs"]),
        retry_backoff=None if raw.get("retryBackoff") is None else float(raw["retryBackoff"]),
        metadata=_metadata(raw),
        created_at=_moment(raw.get("createdAt"), clock),
        updated_at=_moment(raw.get("updatedAt"), clock),
        superseded_by_revision=_revision(raw, "supersededByRevision"),
        recovered_by_revision=_revision(raw, "recoveredByRevision"),
    )
    # Whatever the typed form does not write back (members we do not model, or a default OMA
    # spelled out, such as ``maxRetries: 0``) rides along unchanged.
    written = task_to_json(typed)
    extra = {key: value for key, value in raw.items() if key not in written}
    return replace(typed, extra=extra) if extra else typed


def _revision(raw: Json, key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CheckpointError(f"task {raw['id']!r} has a non-integer {key}: {value!r}")
    return value


_REVISION_KEYS = frozenset(
    {
        "id",
        "version",
        "triggerTaskId",
        "trigger",
        "reason",
        "addedTasks",
        "retargetedTasks",
        "supersededTaskIds",
        "createdAt",
    }
)


def plan_revision_to_json(revision: PlanRevision) -> Json:
    """OMA's ``PlanRevision`` object (queue v2, spec TQ-11)."""
    out: Json = {
        "id": revision.id,
        "version": revision.version,
        "triggerTaskId": revision.trigger_task_id,
        "trigger": revision.trigger,
        "reason": revision.reason,
        "addedTasks": dict(revision.added_tasks),
        "retargetedTasks": [dict(item) for item in revision.retargeted_tasks],
        "supersededTaskIds": list(revision.superseded_task_ids),
        "createdAt": revision.created_at,
    }
    for key, value in (revision.extra or {}).items():
        out.setdefault(key, value)
    return out


def plan_revision_from_json(raw: Any) -> PlanRevision:
    """Parse one plan revision; its consistency with the queue is checked at restore (TQ-13).

    Raises:
        CheckpointError: ``raw`` is not a plan revision object.
    """
    if not isinstance(raw, dict):
        raise CheckpointError(f"plan revision is not an object: {raw!r}"[:200])
    added, retargeted = raw.get("addedTasks") or {}, raw.get("retargetedTasks") or []
    if (
        not isinstance(added, dict)
        or not isinstance(retargeted, list)
        or not all(isinstance(item, dict) for item in retargeted)
    ):
        raise CheckpointError(f"plan revision {raw.get('id')!r} has malformed task references")
    extra = {key: value for key, value in raw.items() if key not in _REVISION_KEYS}
    return PlanRevision(
        id=str(raw.get("id", "")),
        version=int(raw.get("version", 0)),
        trigger_task_id=str(raw.get("triggerTaskId", "")),
        trigger=str(raw.get("trigger", "")),
        reason=str(raw.get("reason", "")),
        added_tasks={str(key): str(value) for key, value in added.items()},
        retargeted_tasks=tuple(dict(item) for item in retargeted),
        superseded_task_ids=tuple(str(item) for item in raw.get("supersededTaskIds") or ()),
        created_at=str(raw.get("createdAt", "")),
        extra=extra or None,
    )


def queue_plan_from_json(queue: Json) -> QueuePlan:
    """The plan revision history of a queue snapshot (v1: none)."""
    if queue.get("version") != 2:
        return QueuePlan()
    return QueuePlan(
        revision=int(queue.get("planRevision", 0)),
        revisions=tuple(plan_revision_from_json(item) for item in queue.get("planRevisions") or ()),
    )

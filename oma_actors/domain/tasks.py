"""Tasks, plan artifacts and the per-task state the queue keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from oma_actors.clock import utcnow
from oma_actors.domain.metadata import check_task_metadata
from oma_actors.ids import new_id

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

TaskStatus = Literal["pending", "blocked", "in_progress", "completed", "failed", "skipped"]
TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset({"completed", "failed", "skipped"})


DEFAULT_RETRY_DELAY_MS = 1000
"""OMA's base delay before a retry when a task sets none (``executeWithRetry``)."""

DEFAULT_RETRY_BACKOFF = 2.0
"""OMA's multiplier per further retry when a task sets none."""


@dataclass(frozen=True, slots=True, init=False)
class Task:
    """A unit of work for one agent.

    Args:
        title: short name; dependents may reference it instead of the id.
        description: what to do; it becomes the agent's prompt.
        id: defaults to a new UUID4.
        assignee: the agent name; unassigned tasks are given to an agent at dispatch.
        depends_on: ids or titles of tasks that must complete first.
        max_retries: extra attempts after a retryable failure.
        metadata: JSON data carried with the task, checked by OMA's rules
            (``oma_actors.domain.metadata``: ``TaskGraphError`` naming the key) and copied.
            Secret-looking values are masked before a snapshot or journal holds them.
        retry_delay_ms: base delay before a retry (spec TQ-10); ``None``: OMA's default,
            ``DEFAULT_RETRY_DELAY_MS``, and the task's snapshot leaves it out as OMA's does.
        retry_backoff: multiplier per further retry (spec TQ-10); ``None``: OMA's default,
            ``DEFAULT_RETRY_BACKOFF``, left out of the snapshot.
    """

    id: str
    title: str
    description: str
    assignee: str | None
    depends_on: tuple[str, ...]
    max_retries: int
    metadata: Mapping[str, Any] | None
    retry_delay_ms: int | None
    retry_backoff: float | None

    def __init__(
        self,
        title: str,
        description: str,
        *,
        id: str | None = None,
        assignee: str | None = None,
        depends_on: Sequence[str] = (),
        max_retries: int = 0,
        metadata: Mapping[str, Any] | None = None,
        retry_delay_ms: int | None = None,
        retry_backoff: float | None = None,
    ) -> None:
        setter = object.__setattr__
        task_id = id if id is not None else new_id()
        setter(self, "id", task_id)
        setter(self, "title", title)
        setter(self, "description", description)
        setter(self, "assignee", assignee)
        setter(self, "depends_on", tuple(depends_on))
        setter(self, "max_retries", max_retries)
        setter(self, "metadata", check_task_metadata(metadata, task_id=task_id))
        setter(self, "retry_delay_ms", retry_delay_ms)
        setter(self, "retry_backoff", retry_backoff)


@dataclass(frozen=True, slots=True)
class PlanTask:
    """One task of a plan artifact: a fixed id, no status or result (spec PL-01).

    ``depends_on`` names the task ids it waits for, not titles.
    """

    id: str
    title: str
    description: str
    assignee: str | None = field(default=None, kw_only=True)
    depends_on: tuple[str, ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "depends_on", tuple(self.depends_on))


@dataclass(frozen=True, slots=True)
class PlanArtifact:
    """A reviewed plan: tasks with fixed ids, to run with ``run_from_plan``.

    It holds only what was planned (goal and tasks), never results or status (spec PL-01).
    """

    tasks: tuple[PlanTask, ...]
    goal: str | None = field(default=None, kw_only=True)
    version: int = field(default=1, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskState:
    """A task as the queue holds it: the task's fields, its status and its result text.

    ``depends_on`` holds resolved task ids.

    Attributes:
        superseded_by_revision: OMA's ``supersededByRevision``: the plan revision that replaced
            this (skipped) task.
        recovered_by_revision: OMA's ``recoveredByRevision``: the plan revision that repaired
            this failed task; such a failure does not fail the run (spec TQ-07).
        extra: members of OMA's ``TaskSnapshot`` this model does not hold (``memoryScope``,
            ``role``, ``requires``, ...), written back unchanged so a re-save loses nothing.
    """

    id: str
    title: str
    description: str
    status: TaskStatus
    assignee: str | None = None
    depends_on: tuple[str, ...] = ()
    result: str | None = None
    max_retries: int = 0
    retry_delay_ms: int | None = None  # None: DEFAULT_RETRY_DELAY_MS, not written (as OMA)
    retry_backoff: float | None = None  # None: DEFAULT_RETRY_BACKOFF, not written (as OMA)
    metadata: Mapping[str, Any] | None = None
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    superseded_by_revision: int | None = None
    recovered_by_revision: int | None = None
    extra: Mapping[str, Any] | None = None

    @property
    def is_terminal(self) -> bool:
        """Whether the task is completed, failed or skipped."""
        return self.status in TERMINAL_STATUSES

    @property
    def is_replaced(self) -> bool:
        """Whether a plan revision took this task's place: a failure it recovered
        (``recovered_by_revision``) or a task it superseded (skipped, ``superseded_by_revision``).

        The revision's own tasks decide the run's outcome in its place (spec TQ-07).
        """
        if self.status == "failed":
            return self.recovered_by_revision is not None
        return self.status == "skipped" and self.superseded_by_revision is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRevision:
    """One accepted runtime plan repair, as OMA records it in a queue v2 snapshot (spec TQ-11).

    Attributes:
        id: the revision's id.
        version: its number, 1.. in order.
        trigger_task_id: the task whose outcome triggered it.
        trigger: the outcome kind that triggered it (``failure``, ``success``, ...).
        reason: why the plan was changed.
        added_tasks: patch-local key -> id of each task the revision appended.
        retargeted_tasks: OMA's ``{taskId, assignee}`` items of the tasks it reassigned.
        superseded_task_ids: the tasks it skipped.
        created_at: the ISO time OMA wrote, kept as written.
        extra: members this model does not hold, written back unchanged.
    """

    id: str
    version: int
    trigger_task_id: str
    trigger: str
    reason: str
    added_tasks: Mapping[str, str] = field(default_factory=dict)
    retargeted_tasks: tuple[Mapping[str, Any], ...] = ()
    superseded_task_ids: tuple[str, ...] = ()
    created_at: str = ""
    extra: Mapping[str, Any] | None = None

    @property
    def referenced_task_ids(self) -> tuple[str, ...]:
        """Every task id the revision names besides its trigger (added, retargeted, superseded)."""
        retargeted = tuple(str(item.get("taskId")) for item in self.retargeted_tasks)
        return (*self.added_tasks.values(), *retargeted, *self.superseded_task_ids)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuePlan:
    """The queue's plan revision history (OMA queue v2; ``revision == 0`` means queue v1).

    Attributes:
        revision: the current plan revision (OMA's ``planRevision``).
        revisions: every accepted revision, in order (OMA's ``planRevisions``).
    """

    revision: int = 0
    revisions: tuple[PlanRevision, ...] = ()

    @property
    def is_revised(self) -> bool:
        """Whether the queue has a plan revision, i.e. is written as queue v2."""
        return self.revision != 0 or bool(self.revisions)

"""The task queue state machine (spec section 15): statuses, readiness and cascades.

The queue is plain state owned by one RunActor; it performs no I/O and emits nothing. Every
mutation returns the tasks it changed so the caller can report each change as a fact to the
run's journal (``run_facts``) and publish its event, in order.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from oma_actors.clock import SYSTEM_CLOCK, Clock
from oma_actors.domain.tasks import QueuePlan, Task, TaskState, TaskStatus
from oma_actors.errors import ConfigurationError
from oma_actors.orchestration.graph import resolve_dependencies
from oma_actors.stores.redaction import redact_object

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence


class TaskQueue:
    """Tasks in queue order with their statuses (spec TQ-01..TQ-07).

    Args:
        states: the tasks, in queue order.
        plan: the plan revision history (OMA queue v2), carried as restored.
        clock: stamps ``updated_at`` on every status change.
    """

    def __init__(
        self,
        states: Iterable[TaskState],
        *,
        plan: QueuePlan | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._states: dict[str, TaskState] = {state.id: state for state in states}
        self._plan = plan or QueuePlan()
        self._clock = clock

    @classmethod
    def from_tasks(cls, tasks: Sequence[Task], *, clock: Clock = SYSTEM_CLOCK) -> TaskQueue:
        """Validate the graph (``TaskGraphError`` on failure) and add every task as pending.

        Spec TQ-01: dependencies are resolved by id or title first, so a bad graph is refused
        before any task is queued.
        """
        deps = resolve_dependencies(tasks)
        now = clock.now()
        queue = cls(
            (
                TaskState(
                    id=task.id,
                    title=task.title,
                    description=task.description,
                    status="pending",
                    assignee=task.assignee,
                    depends_on=deps[task.id],
                    max_retries=task.max_retries,
                    retry_delay_ms=task.retry_delay_ms,
                    retry_backoff=task.retry_backoff,
                    metadata=masked_metadata(task.metadata),
                    created_at=now,
                    updated_at=now,
                )
                for task in tasks
            ),
            clock=clock,
        )
        queue.refresh_readiness()
        return queue

    # -- reading -------------------------------------------------------------------------------

    @property
    def tasks(self) -> list[TaskState]:
        """Every task, in queue order."""
        return list(self._states.values())

    def get(self, task_id: str) -> TaskState:
        """The task with ``task_id``; ``ConfigurationError`` if there is none."""
        try:
            return self._states[task_id]
        except KeyError:
            raise ConfigurationError(f"unknown task id {task_id!r}") from None

    def ready(self) -> list[TaskState]:
        """Pending tasks, in queue order."""
        return [state for state in self._states.values() if state.status == "pending"]

    def with_status(self, status: TaskStatus) -> list[TaskState]:
        """Tasks currently in ``status``, in queue order."""
        return [state for state in self._states.values() if state.status == status]

    @property
    def is_complete(self) -> bool:
        """True when every task is terminal (or there are none) (TQ-06)."""
        return all(state.is_terminal for state in self._states.values())

    @property
    def plan(self) -> QueuePlan:
        """The plan revision history (revision 0: a fixed plan, written as queue v1)."""
        return self._plan

    def failures(self) -> list[TaskState]:
        """Failed tasks that fail the run, in queue order (spec TQ-07).

        A failure a plan revision recovered (``recovered_by_revision``) stays ``failed`` in the
        history but does not count: the repaired plan replaced it.
        """
        return [task for task in self.with_status("failed") if task.recovered_by_revision is None]

    # -- transitions ---------------------------------------------------------------------------

    def assign(self, task_id: str, assignee: str) -> TaskState:
        """Record the agent a waiting task will go to (before its dispatch gate sees it)."""
        state = self.get(task_id)
        if state.assignee == assignee:
            return state
        return self._put(state, state.status, assignee=assignee)

    def start(self, task_id: str, assignee: str) -> TaskState:
        """Mark a pending task in progress with its assignee."""
        state = self.get(task_id)
        if state.status != "pending":
            raise ConfigurationError(f"task {task_id!r} is {state.status}, not pending")
        return self._put(state, "in_progress", assignee=assignee)

    def complete(self, task_id: str, result: str) -> list[TaskState]:
        """Complete a task; return the tasks that became ready because of it (TQ-02)."""
        self._put(self.get(task_id), "completed", result=result)
        return self.refresh_readiness()

    def fail(self, task_id: str, message: str) -> list[TaskState]:
        """Fail a task and cascade to its pending/blocked dependents; return the cascade (TQ-03)."""
        self._put(self.get(task_id), "failed", result=message)
        return self._cascade(task_id, "failed", f'Cancelled: dependency "{task_id}" failed.')

    def skip(self, task_id: str, reason: str) -> list[TaskState]:
        """Skip a task and cascade to its pending/blocked dependents; return the cascade (TQ-04)."""
        self._put(self.get(task_id), "skipped", result=reason)
        return self._cascade(task_id, "skipped", f'Skipped: dependency "{task_id}" was skipped.')

    def skip_remaining(self, reason: str) -> list[TaskState]:
        """Skip every non-terminal task with ``reason``; callers drain in-flight work first.

        Pending, blocked and in-progress tasks all become skipped, each reported once, as OMA's
        ``skipRemaining`` does when a run is aborted, out of budget or refused at a gate.
        """
        return [
            self._put(state, "skipped", result=reason)
            for state in list(self._states.values())
            if not state.is_terminal
        ]

    def reset_in_progress(self) -> list[TaskState]:
        """Return in-progress tasks to pending and recompute readiness (restore, TQ-13)."""
        reset = [
            self._put(state, "pending")
            for state in list(self._states.values())
            if state.status == "in_progress"
        ]
        self.refresh_readiness()
        return reset

    def refresh_readiness(self) -> list[TaskState]:
        """Recompute pending/blocked for waiting tasks; return those that became pending."""
        became_ready: list[TaskState] = []
        for state in list(self._states.values()):
            if state.status not in ("pending", "blocked"):
                continue
            ready = all(
                dep in self._states and self._states[dep].status == "completed"
                for dep in state.depends_on
            )
            if ready and state.status == "blocked":
                became_ready.append(self._put(state, "pending"))
            elif not ready and state.status == "pending":
                self._put(state, "blocked")
        return became_ready

    def _cascade(self, source: str, status: TaskStatus, reason: str) -> list[TaskState]:
        changed: list[TaskState] = []
        for state in list(self._states.values()):
            if source in state.depends_on and state.status in ("pending", "blocked"):
                changed.append(self._put(state, status, result=reason))
                changed.extend(self._cascade(state.id, status, _cascade_reason(state.id, status)))
        return changed

    def _put(self, state: TaskState, status: TaskStatus, **changes: object) -> TaskState:
        updated = replace(state, status=status, updated_at=self._clock.now(), **changes)  # type: ignore[arg-type]
        self._states[state.id] = updated
        return updated


def _cascade_reason(task_id: str, status: TaskStatus) -> str:
    if status == "failed":
        return f'Cancelled: dependency "{task_id}" failed.'
    return f'Skipped: dependency "{task_id}" was skipped.'


def masked_metadata(metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Task metadata with its secret-looking values masked (spec T-95).

    The queue holds only this form, so no snapshot, journal event or approval built from a
    queued task ever holds the raw value.
    """
    return None if metadata is None else MappingProxyType(redact_object(metadata))

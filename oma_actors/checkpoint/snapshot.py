"""The typed checkpoint snapshot (spec 7.2): frozen values, no I/O, no JSON here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from oma_actors.domain.tasks import QueuePlan

if TYPE_CHECKING:
    from collections.abc import Mapping

    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.messages import TokenUsage
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.domain.tasks import TaskState

SnapshotStatus = Literal["in_progress", "suspended", "completed", "failed", "rejected"]
_TERMINAL = frozenset({"completed", "failed", "skipped"})

RunMode = Literal["runTeam", "runTasks", "runFromPlan"]
WRITE_VERSION = 4
READ_VERSIONS = (1, 2, 3, 4, 5)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunIdentity:
    """Which run and which attempt wrote a snapshot (spec ID-01)."""

    run_id: str
    attempt: int
    trace_id: str
    root_span_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletedTask:
    """A completed task's output and, when it could be stored, its full result (CK-09, CK-10)."""

    task_id: str
    assignee: str | None
    result: str | None
    agent_result: AgentRunResult | None


@dataclass(frozen=True, slots=True, kw_only=True)
class InFlightTask:
    """A task interrupted mid-run: the runner state to resume from (spec 7.2, RN-03)."""

    task_id: str
    assignee: str
    state: RunnerState


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSnapshot:
    """One saved run state.

    Attributes:
        version: the schema version it was read from (written: 4).
        mode: ``runTeam``, ``runTasks`` or ``runFromPlan``.
        run_id: the run's id (v1 without one: ``""``).
        attempt: the attempt that wrote it (v1: 1).
        revision: successful saves of this run so far (our field; 0 when absent).
        synthesis: the run_team synthesis once it exists (our field, decision D4).
        planning_usage: the token usage of run_team's decomposition (our field).
        announced: completed tasks whose completion event was delivered (our field; ``None``
            when the snapshot predates it, i.e. every completion counts as announced).
        plan: the queue's plan revision history (OMA queue v2; none means queue v1).
        raw: the stored OMA-compatible JSON object (for display and audit).
        source: the JSON object the run was restored from (``decode`` sets it to ``raw``).
            Every member of it this model does not hold is written back by ``encode``, so a
            re-save keeps what another writer (OMA) put there.
    """

    version: int
    mode: RunMode
    run_id: str
    attempt: int
    revision: int
    created_at: str
    tasks: tuple[TaskState, ...]
    identity: RunIdentity | None = None
    goal: str | None = None
    metadata: dict[str, Any] | None = None
    shared_memory: dict[str, Any] | None = None
    message_bus: dict[str, Any] | None = None
    turn_count: int | None = None
    completed: tuple[CompletedTask, ...] = ()
    in_flight: tuple[InFlightTask, ...] = ()
    pending_approvals: tuple[ApprovalRequest, ...] = ()
    approval_decisions: tuple[ApprovalDecision, ...] = ()
    synthesis: AgentRunResult | None = None
    planning_usage: TokenUsage | None = None
    announced: tuple[str, ...] | None = None
    plan: QueuePlan = field(default_factory=QueuePlan)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    source: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def in_progress_ids(self) -> list[str]:
        """Ids of tasks that were in progress when this was saved."""
        return [task.id for task in self.tasks if task.status == "in_progress"]

    @property
    def is_finished(self) -> bool:
        """Whether every task of the run had completed."""
        return all(task.status == "completed" for task in self.tasks)

    @property
    def status(self) -> SnapshotStatus:
        """Where the saved run stands.

        ``completed``: every task completed. ``suspended``: it waits for an approval.
        ``rejected`` / ``failed``: every task is terminal but not all completed (a rejection
        was decided, or tasks failed or were skipped). ``in_progress``: anything else, i.e. the
        run stopped mid-way (a crash, an abort) and ``restore()`` continues it.
        """
        if self.is_finished:
            return "completed"
        if self.pending_approvals:
            return "suspended"
        if all(task.status in _TERMINAL for task in self.tasks):
            rejected = any(d.decision == "rejected" for d in self.approval_decisions)
            return "rejected" if rejected else "failed"
        return "in_progress"

    @property
    def is_unfinished(self) -> bool:
        """Whether ``restore()`` would continue this run (in progress or suspended)."""
        return self.status in ("in_progress", "suspended")

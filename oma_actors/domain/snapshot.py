"""The typed checkpoint snapshot (spec 7.2): the run state the journal's fold produces (D14).

Frozen values, no I/O, no JSON here; below the journal and the checkpoint, which both use it.
"""

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
JOURNAL_WRITE_VERSION = 5  # spec JR-10: written only by a run that has a journal
READ_VERSIONS = (1, 2, 3, 4, 5)

# OMA's ``conversationLineage``: per conversation message, per block, the journal seqs the block
# came from, or ``None`` where no lineage was recorded (spec JR-07, JR-19).
ConversationLineage = tuple[tuple[tuple[int, ...] | None, ...], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunIdentity:
    """Which run and which attempt wrote a snapshot (spec ID-01)."""

    run_id: str
    attempt: int
    trace_id: str
    root_span_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkedFrom:
    """Where a forked run started (decision D17): its parent and the parent's history point.

    Written as ``forkedFrom: {"runId", "seq"}``; a run that was not forked has none.
    """

    run_id: str
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletedTask:
    """A completed task's output and, when it could be stored, its full result (CK-09, CK-10)."""

    task_id: str
    assignee: str | None
    result: str | None
    agent_result: AgentRunResult | None


@dataclass(frozen=True, slots=True, kw_only=True)
class InFlightTask:
    """A task interrupted mid-run: the runner state to resume from (spec 7.2, RN-03).

    Attributes:
        task_id: the task.
        assignee: the agent running it (the journal's ``agentName`` of its events, JR-13).
        state: the runner state.
        journal_seq: OMA's ``journalSeq`` (v5): every journal event of this task up to this seq
            is in ``state``, none above (spec JR-12). ``None``: unknown, the snapshot's
            watermark stands in for it.
        conversation_lineage: OMA's ``conversationLineage`` (v5): one element per message of
            ``state.conversation`` (checked on construction), so the two stay positional.
    """

    task_id: str
    assignee: str
    state: RunnerState
    journal_seq: int | None = None
    conversation_lineage: ConversationLineage | None = None

    def __post_init__(self) -> None:
        lineage = self.conversation_lineage
        # A lineage that is not positional would be written and then refused on load (T-100).
        if lineage is not None and len(lineage) != len(self.state.conversation):
            raise ValueError(
                f"conversation_lineage of task {self.task_id!r} has {len(lineage)} elements for "
                f"{len(self.state.conversation)} messages"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSnapshot:
    """One saved run state.

    Attributes:
        version: the schema version it was read from (written: 4, or 5 with a journal).
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
        journal_watermark_seq: OMA's ``journalWatermarkSeq``: the highest journal seq this
            snapshot folds. Set only for a run with a journal; then ``encode`` writes schema v5
            (spec JR-10), otherwise v4. ``decode`` leaves it unset even for a v5 value (a
            restore without a journal is a v4 restore, JR-11); ``adopt_journal_fields`` reads
            the v5 members of ``source`` into the typed fields.
        journal_ref: OMA's ``journalRef`` (the journal's ``describe()``; informational).
        forked_from: the parent run and history point this run was forked from (our field,
            decision D17; ``None`` for a run that was not forked).
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
    journal_watermark_seq: int | None = None
    journal_ref: dict[str, Any] | None = None
    forked_from: ForkedFrom | None = None
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

        ``completed``: every task completed, or a plan revision took its place (a failure it
        recovered, a task it superseded: spec TQ-07 ignores them, OMA calls such a run ``ok``).
        ``suspended``: it waits for an approval. ``rejected`` / ``failed``: every task is
        terminal but not all completed (a rejection was decided, or tasks failed or were
        skipped). ``in_progress``: anything else, i.e. the run stopped mid-way (a crash, an
        abort) and ``restore()`` continues it.
        """
        if all(task.status == "completed" for task in self.tasks if not task.is_replaced):
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

"""Progress events handed to ``on_progress``: frozen values, all subclasses of ``ProgressEvent``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oma_actors.domain.approvals import ApprovalRequest
    from oma_actors.domain.results import AgentRunResult


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressEvent:
    """Base of every progress event; ``run_id`` is the run's id (``None`` for ``run_agent``)."""

    run_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(ProgressEvent):
    """An attempt of a checkpointed run started, fresh or restored.

    Attributes:
        attempt: this attempt (1 for a fresh run).
        trace_id: this attempt's trace id (W3C, 32 hex), as its snapshots record it.
        root_span_id: this attempt's root span id (16 hex).
        continued_from_trace_id: the interrupted attempt's trace id, on a restore.
        continued_from_span_id: the interrupted attempt's root span id, on a restore.
    """

    attempt: int
    trace_id: str
    root_span_id: str
    continued_from_trace_id: str | None = None
    continued_from_span_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(ProgressEvent):
    """An attempt's task work ended: ``status`` is ``ok``, ``error``, ``suspended``, ..."""

    status: str
    message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCompleted(ProgressEvent):
    """A model call of a task's conversation returned (one turn).

    Attributes:
        task_id: the task (``None`` for ``run_agent``).
        agent: the agent.
        turn: the turn's number in the conversation (1-based, counted across restores).
        input_tokens: the turn's input tokens.
        output_tokens: the turn's output tokens.
        duration_ms: how long the model call took.
        tool_calls: how many tool calls the model asked for.
    """

    task_id: str | None
    agent: str
    turn: int
    input_tokens: int
    output_tokens: int
    duration_ms: float
    tool_calls: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStarted(ProgressEvent):
    """A task was dispatched to its agent."""

    task_id: str
    title: str
    agent: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCompleted(ProgressEvent):
    """A task completed (after its shared-memory write and, when on, its checkpoint save)."""

    task_id: str
    title: str
    agent: str
    result: AgentRunResult


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFailed(ProgressEvent):
    """A task failed for good (retries exhausted, or a dependency failed)."""

    task_id: str
    title: str
    agent: str | None
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSkipped(ProgressEvent):
    """A task was skipped (cascade from a skipped dependency, abort, rejection)."""

    task_id: str
    title: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRetry(ProgressEvent):
    """A task attempt failed with a retryable error; another attempt follows after a delay."""

    task_id: str
    attempt: int
    max_attempts: int
    error: str
    next_delay_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCompleted(ProgressEvent):
    """An agent finished a task, a coordinator phase or a ``run_agent`` call."""

    agent: str
    task_id: str | None
    result: AgentRunResult


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCalled(ProgressEvent):
    """A tool call returned (``replayed`` when its committed result was reused on restore)."""

    task_id: str | None
    agent: str
    tool_name: str
    tool_call_id: str
    is_error: bool
    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSaved(ProgressEvent):
    """A checkpoint save completed and is durable.

    Attributes:
        revision: this run's successful saves so far.
        boundary: the named boundary the save made durable (``tool_commit``, ``task_completed``,
            ...; see ``oma_actors.checkpoint.boundaries``).
        task_id: the task whose state the boundary recorded, if any.
        committed: the tool calls whose commit records this durable save contains; a host that
            executed one of them may forget it (its result will be replayed, never re-run).
        mode: ``"snapshot"`` (the whole snapshot was written) or ``"journal"`` (a durable
            journal's events alone made the boundary durable, decision D10).
    """

    revision: int
    boundary: str | None = None
    task_id: str | None = None
    committed: tuple[str, ...] = ()
    mode: str = "snapshot"


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSaveFailed(ProgressEvent):
    """A checkpoint save failed.

    At a best-effort boundary the run continues; at a strict one (``strict``) the step that
    needed the save does not happen (decision D2).

    Attributes:
        error: what failed.
        boundary: the named boundary whose save failed, if known.
        strict: whether the boundary required the save before going on.
    """

    error: str
    boundary: str | None = None
    strict: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorFailed(ProgressEvent):
    """``run_team`` could not get a valid plan from the coordinator (spec CD-03)."""

    code: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SynthesisFailed(ProgressEvent):
    """The coordinator's synthesis failed on restore (spec CD-09)."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPending(ProgressEvent):
    """A boundary was suspended for approval and its request is durable.

    Attributes:
        request: the durable request.
        task_id: for a tool call's request, the task whose call it holds (OMA's ``task``);
            ``None`` for a plan or dispatch request, whose OMA event names no task either.
        agent: for a tool call's request, the agent that made the call (OMA's ``agent``).
    """

    request: ApprovalRequest
    task_id: str | None = None
    agent: str | None = None

    def __post_init__(self) -> None:
        # Whoever emits the event, it carries what OMA's does: a tool call's request content
        # names the task and the agent (a restore checks that agent is the task's assignee).
        if self.request.scope != "tool_call":
            return
        content = self.request.content
        if self.task_id is None:
            object.__setattr__(self, "task_id", content.get("taskId"))
        if self.agent is None:
            object.__setattr__(self, "agent", content.get("agentName"))


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalTailDiscarded(ProgressEvent):
    """A journal tail failed the fold checks and was discarded."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalAppendFailed(ProgressEvent):
    """A journal append failed; the run continues."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcomeUnknown(ProgressEvent):
    """An unsafe tool call was dispatched but not committed before a crash (decision D1)."""

    task_id: str
    tool_call_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseLost(ProgressEvent):
    """This process lost the run lease and stopped writing."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExceeded(ProgressEvent):
    """OMA's ``budget_exceeded``: the run's token or cost budget was passed, so it stops.

    Attributes:
        kind: ``"tokens"`` or ``"cost"``.
        used: tokens (input + output) or the estimated cost spent by the run so far.
        budget: the ``max_token_budget`` or ``max_cost_budget`` passed.
        message: the run's status message, OMA's error message (``Agent "<agent>" exceeded
            token budget: <n> tokens used (budget: <b>)``, or ``... exceeded cost budget: <c>
            estimated cost used (budget: <b>)``).
        agent: the agent whose charge passed the budget (OMA's ``agent``): a task's assignee,
            or ``coordinator`` for the decomposition and the synthesis.
        task_id: the task whose charge passed it (OMA's ``task``); ``None`` for the
            coordinator's calls.
    """

    kind: str
    used: float
    budget: float
    message: str
    agent: str | None = None
    task_id: str | None = None


__all__ = [
    "AgentCompleted",
    "ApprovalPending",
    "BudgetExceeded",
    "CheckpointSaveFailed",
    "CheckpointSaved",
    "CoordinatorFailed",
    "JournalAppendFailed",
    "JournalTailDiscarded",
    "LeaseLost",
    "ProgressEvent",
    "RunFinished",
    "RunStarted",
    "SynthesisFailed",
    "TaskCompleted",
    "TaskFailed",
    "TaskRetry",
    "TaskSkipped",
    "TaskStarted",
    "ToolCalled",
    "ToolOutcomeUnknown",
    "TurnCompleted",
]

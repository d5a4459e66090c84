"""What runs return: per-agent results, per-task states and the team result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from oma_actors.domain.messages import Message, TokenUsage

if TYPE_CHECKING:
    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.tasks import TaskState

RunStatusCode = Literal["ok", "error", "suspended", "rejected", "aborted", "budget_exhausted"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    """One executed (or replayed) tool call, as OMA records it in the call's commit.

    The record holds the tool's name, the model's input, the recorded output text and the
    duration in milliseconds (spec RN-10).
    """

    tool_name: str
    input: dict[str, Any]
    output: str
    duration_ms: int
    tool_call_id: str = ""
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRunResult:
    """The outcome of one agent working one prompt or task.

    ``status`` is OMA's ``status`` where it says more than ``success``: ``budget_exhausted``
    when the agent's token budget ran out, ``rejected`` when a consequential call needed a
    confirmation it did not get (``confirmation_required`` then says none was possible),
    ``suspended`` when a tool call waits for a durable approval (the task stays in progress).
    ``None`` means the plain ``ok`` or ``error`` that ``success`` implies. An agent's merged
    ``agent_results`` entry takes its later part's status, as OMA's does: one whose later
    part succeeded says ``ok`` even though an earlier part failed (``success`` is ``False``).
    """

    success: bool
    output: str
    messages: list[Message] = field(default_factory=list)
    token_usage: TokenUsage = field(default_factory=TokenUsage)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    turns: int = 0
    status: RunOutcome | None = None
    confirmation_required: bool = False


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended (its status code) and, when it is not ``ok``, why.

    Formerly ``RunStatus`` (still importable from ``oma_actors``, deprecated): renamed so no
    two types share a name with the run record's ``oma_actors.runs.RunStatus`` (D16).
    """

    code: RunStatusCode
    message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamRunResult:
    """The outcome of ``run_tasks``, ``run_team``, ``run_from_plan`` or ``restore``.

    ``checkpoint_saves`` and ``checkpoint_save_failures`` count this attempt's checkpoint
    writes that became durable and that did not. A run that did its work but whose saves
    failed still succeeds, and its ``status.message`` says what a restore would find.
    ``confirmation_required`` is OMA's ``confirmationRequired``: a consequential tool call
    was refused because no ``on_tool_call`` gate (or approved plan) could confirm it.
    """

    success: bool
    status: RunOutcome
    run_id: str
    attempt: int
    tasks: list[TaskState]
    task_results: dict[str, AgentRunResult]
    agent_results: dict[str, AgentRunResult]
    token_usage: TokenUsage
    pending_approvals: list[ApprovalRequest] = field(default_factory=list)
    approval_decisions: list[ApprovalDecision] = field(default_factory=list)
    plan_only: bool = False
    checkpoint_saves: int = 0
    checkpoint_save_failures: int = 0
    confirmation_required: bool = False

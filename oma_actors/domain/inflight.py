"""In-flight runner state: what a snapshot captures of one agent working one task (spec RN-03).

These are plain values over the domain's messages, so the checkpoint codec can encode them and the
runner can resume from them without either depending on the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from oma_actors.domain.messages import Message, TokenUsage, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.results import ToolCallRecord

RunnerPhase = Literal["awaiting_model", "executing_tools", "completed"]
BoundaryKind = Literal[
    "assistant_tool_turn",
    "tool_dispatch",
    "tool_commit",
    "tool_results",
    "terminal",
    "attempt_reset",
    "approval_requested",
    "suspended",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCommit:
    """The per-call commit record: the model-visible result block and the call's record.

    ``delegation_usage`` is OMA's ``delegationUsage``: tokens a delegating tool spent in a
    sub-agent, added to the task's usage when the committed result is replayed.
    """

    block: ToolResultBlock
    record: ToolCallRecord
    delegation_usage: TokenUsage | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """A tool call of the current turn.

    Attributes:
        call: the model-issued call (its ``id`` is reused if the call runs again).
        commit: set once the result is recorded; a committed call is replayed, never re-run.
        dispatched: an ``unsafe`` tool's call was durably marked as started (decision D1).
        approval_request: the durable approval this call is suspended on (spec AP-25).
        approval_decision: the reviewer's decision, attached on restore (spec AP-29).
    """

    call: ToolUseBlock
    commit: ToolCommit | None = None
    dispatched: bool = False
    approval_request: ApprovalRequest | None = None
    approval_decision: ApprovalDecision | None = None

    @property
    def awaiting_approval(self) -> bool:
        """Suspended at this call: a request exists, no decision, no commit."""
        return (
            self.commit is None
            and self.approval_request is not None
            and self.approval_decision is None
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerState:
    """One conversation in flight.

    Attributes:
        phase: ``awaiting_model`` (next step is a model call), ``executing_tools`` (the last
            assistant turn's calls are pending) or ``completed``.
        conversation: the full model context, starting with the initial user prompt.
        messages: the messages the runner produced (the conversation minus the prompt).
        turns: model responses received so far.
        token_usage: summed usage of those responses.
        tool_calls: records of every committed call, in order.
        pending: the current turn's calls while ``phase == "executing_tools"``.
        final_output: the answer once ``completed``.
        success: whether the completed run ended with a final answer.
        retryable: for an unsuccessful run, whether another attempt may succeed.
        budget_exceeded: OMA's ``budgetExceeded``: the agent's token budget ran out.
        loop_warned: OMA's ``loopWarned``: loop detection warned the model once.
        loop_detected: OMA's ``loopDetected``: loop detection stopped the runner.
        pending_tool_result_text: OMA's ``pendingToolResultText``: text appended after the
            tool results of the current turn (e.g. a loop warning), carried across restores.
    """

    phase: RunnerPhase
    conversation: tuple[Message, ...]
    messages: tuple[Message, ...] = ()
    turns: int = 0
    token_usage: TokenUsage = field(default_factory=TokenUsage)
    tool_calls: tuple[ToolCallRecord, ...] = ()
    pending: tuple[PendingCall, ...] = ()
    final_output: str = ""
    success: bool = True
    retryable: bool = False
    budget_exceeded: bool = False
    loop_warned: bool = False
    loop_detected: bool = False
    pending_tool_result_text: str | None = None

    @property
    def uncommitted(self) -> tuple[PendingCall, ...]:
        """Pending calls that have no commit yet, in call order."""
        return tuple(item for item in self.pending if item.commit is None)

    @property
    def awaiting_approval(self) -> tuple[PendingCall, ...]:
        """Calls suspended on an undecided approval."""
        return tuple(item for item in self.pending if item.awaiting_approval)

"""The runner's explicit state: what a snapshot captures of one agent working one task (RN-03)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from oma_actors.domain.messages import Message, TokenUsage, ToolUseBlock

if TYPE_CHECKING:
    from oma_actors.domain.results import ToolCallRecord
    from oma_actors.tools.executor import ToolOutcome

RunnerPhase = Literal["awaiting_model", "executing_tools", "completed"]
BoundaryKind = Literal["assistant_tool_turn", "tool_commit", "tool_results", "terminal"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """A tool call of the current turn; ``commit`` is set once its result is recorded."""

    call: ToolUseBlock
    commit: ToolOutcome | None = None


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

    @property
    def uncommitted(self) -> tuple[PendingCall, ...]:
        """Pending calls that have no commit yet, in call order."""
        return tuple(item for item in self.pending if item.commit is None)

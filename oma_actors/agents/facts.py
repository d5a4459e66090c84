"""The facts a runner's turn loop reports with a boundary, as they happen (decision D14).

The journal records a run's facts where they happen, never by diffing two states: the loop
knows what it just did (an answer arrived, a call dispatched, a result committed, the results
went back) and hands that fact to the boundary hook together with the state it produced. The
run's journal writes it in OMA's vocabulary (``assistant/message``, ``tool/call``,
``tool/result``, ``user/message`` origin ``tool_results``) at the moment the run adopts that
state, so the snapshot's watermark and its in-flight entries always agree (JR-08).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from oma_actors.domain.inflight import RunnerState, ToolCommit
    from oma_actors.domain.messages import Message, TokenUsage, ToolUseBlock
    from oma_actors.journal.vocabulary import TurnOutcome

__all__ = [
    "Answered",
    "BudgetExceeded",
    "CallCommitted",
    "CallDispatched",
    "Fact",
    "Facts",
    "Prompted",
    "ResultsReturned",
    "Retrying",
    "TurnEnded",
    "TurnLimitReached",
    "turn_end",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prompted:
    """The caller opened a conversation, or went on with it, with a user message.

    The message is the caller's (``initial_state``, ``with_user_message``), so the caller hands
    it to ``drive``, which reports it with the first model request that sends it.

    Attributes:
        message: the user message, the very object the state's conversation holds.
    """

    message: Message


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """The model answered: its message joined the conversation (``assistant/message``).

    Attributes:
        message: the assistant message, the very object the state's conversation holds (its
            blocks' lineage is registered by identity, JR-07).
        usage: the response's own usage (what the state's usage gained with it).
        stop_reason: why the model stopped (the state does not keep it).
    """

    message: Message
    usage: TokenUsage
    stop_reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CallDispatched:
    """An ``unsafe`` call is about to run; its dispatch must be durable first (decision D1).

    Attributes:
        call: the call as the model issued it (an approval's edits are not part of it).
    """

    call: ToolUseBlock


@dataclass(frozen=True, slots=True, kw_only=True)
class CallCommitted:
    """A call's result was committed (run, denied, settled unknown or rejected).

    Attributes:
        call: the call as the model issued it.
        commit: its result block, its record and any delegated usage.
    """

    call: ToolUseBlock
    commit: ToolCommit
    consumes_approval: bool = False
    """The call ran (or was answered) on a reviewer's decision: its request is used up."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultsReturned:
    """Every call of the turn committed: the results message goes back to the model.

    Attributes:
        message: the user message of result blocks (and a loop warning, if any), as held by
            the state's conversation.
    """

    message: Message


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded:
    """A model turn closed (``turn/end``): its results went back, it answered, or it parked.

    A parked turn is reported at every boundary that shows it parked; the journal records the
    first (it holds one end per turn).

    Attributes:
        turn: the turn's number (the state's turn count).
        outcome: how it closed, in OMA's words.
    """

    turn: int
    outcome: TurnOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExceeded:
    """The task's usage went over its token budget (``maxTokenBudget``).

    OMA's journal says so only when the turn ends (``turn/end`` budget_exceeded); on a tool
    turn the calls still run first, and no event carries the flag until then.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnLimitReached:
    """The conversation reached ``max_turns`` and completed with its last assistant text.

    OMA has no event for it: its runner just leaves the loop, and the fold of a journal that
    ends in the last turn's results still shows the conversation awaiting the model, so the
    run's journal marks the completion as a fact no event carries (a restore of either form
    ends the same way: the awaiting conversation stops again before any model call).

    Attributes:
        max_turns: the agent's limit.
    """

    max_turns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Retrying:
    """The attempt ended without an answer and the task is retried (its open turn failed).

    Reported by the runner as it decides the retry, with no boundary: no state goes with it.

    Attributes:
        attempt: the attempt that failed.
    """

    attempt: int


Fact: TypeAlias = (
    Prompted
    | Answered
    | BudgetExceeded
    | CallDispatched
    | CallCommitted
    | ResultsReturned
    | Retrying
    | TurnEnded
    | TurnLimitReached
)
Facts: TypeAlias = tuple[Fact, ...]


def turn_end(state: RunnerState) -> TurnEnded | None:
    """The end of the state's last model turn, if the state shows it closed.

    Called by the loop right where a turn may close: after an answer, after the results went
    back, when a call parks or commits beside a parked one.
    """
    outcome: TurnOutcome | None
    if state.phase == "completed":
        if state.budget_exceeded:
            outcome = "budget_exceeded"
        elif state.loop_detected:
            outcome = "loop_detected"
        else:
            outcome = "completed" if state.success else "error"
    elif state.phase == "awaiting_model":
        outcome = "tool_use"  # its results went back to the model
    elif state.awaiting_approval and all(
        item.commit is not None or item.awaiting_approval for item in state.pending
    ):
        outcome = "suspended"
    else:
        outcome = None
    return None if outcome is None else TurnEnded(turn=state.turns, outcome=outcome)

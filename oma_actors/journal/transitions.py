"""How a fact changes one conversation in flight: one set of rules for the running run and for
the fold (decision D14, issue 19 item 2). No I/O.

The runner's turn loop changes its state by these rules as each fact happens (``agents.turn``:
an answer arrived, a call's result committed, the results went back to the model, the caller
went on, a context strategy rewrote the conversation, a final answer closed the turn). A restore
folds the journal's events by the very same rules (``fold_rules`` reads each event back into the
fact it records and applies its rule). So the state a restore rebuilds from a snapshot and its
journal is the state the run held, by construction: there is one transition per fact, not a
runner's and a fold's kept in agreement (the property test over random runs,
``tests/journal_facts/test_facts_fold_property.py``, asserts the equality at every durable
boundary).

The rules work on a ``StateDraft``, a mutable copy of a state's changing members. The running
run makes one per transition (``StateDraft.of`` then ``state_of``); the fold keeps one per entry
across a whole tail (``fold_rules.EntryDraft``, which adds the entry's lineage), so a fold of n
events appends to lists instead of copying the conversation per event.

A rule checks before it changes anything and raises ``Refused`` when the fact does not fit the
state: the running run never does that (it would be a bug of the loop), and the fold discards the
whole tail (JR-16).

What these rules do not carry is the runner's alone, in ``agents.turn``: an exceeded token budget,
a stop at ``max_turns``, a failed model call, a dispatch mark, an approval request. Each is a fact
no event carries (or a mark the journal keeps apart), so the boundary that follows it compacts
(``checkpoint.journal_path``): a restore reads it from the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Self

from oma_actors.domain.inflight import PendingCall, RunnerState
from oma_actors.domain.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_of

if TYPE_CHECKING:
    from oma_actors.domain.inflight import RunnerPhase, ToolCommit
    from oma_actors.domain.messages import ContentBlock, TokenUsage
    from oma_actors.domain.results import ToolCallRecord

__all__ = [
    "Refused",
    "StateDraft",
    "answered",
    "check_rewrite",
    "committed",
    "final_answer",
    "finished",
    "prompted",
    "results_message",
    "returned",
    "rewritten",
    "uncommitted_call",
]


class Refused(ValueError):
    """A fact does not fit the state it would change; ``reason`` says which rule refused it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True, kw_only=True)
class StateDraft:
    """A runner state's changing members while facts change them, mutable.

    Messages and tool-call records the facts add are collected in lists and joined to the
    state's own once, by ``state_of``; a rewrite of the conversation (``rewritten``) replaces the
    conversation the added messages follow.

    Attributes:
        phase, turns, token_usage, final_output, success, pending_tool_result_text: the
            state's members.
        pending: the state's pending calls.
        conversation: the conversation the added messages follow (the state's, or a rewrite's).
        added: messages appended to the conversation since.
        messages: messages appended to the runner's messages (never rewritten).
        records: tool-call records appended to ``tool_calls``.
    """

    phase: RunnerPhase
    turns: int
    token_usage: TokenUsage
    final_output: str
    success: bool
    pending_tool_result_text: str | None
    pending: list[PendingCall]
    conversation: tuple[Message, ...]
    added: list[Message]
    messages: list[Message]
    records: list[ToolCallRecord]

    @classmethod
    def of(cls, state: RunnerState, **more: Any) -> Self:
        """A draft of ``state``, nothing added yet (``more``: a subclass's own members)."""
        return cls(
            phase=state.phase,
            turns=state.turns,
            token_usage=state.token_usage,
            final_output=state.final_output,
            success=state.success,
            pending_tool_result_text=state.pending_tool_result_text,
            pending=list(state.pending),
            conversation=state.conversation,
            added=[],
            messages=[],
            records=[],
            **more,
        )

    def append(self, message: Message) -> None:
        """Append ``message`` to the conversation and to the messages."""
        self.added.append(message)
        self.messages.append(message)

    def replace_conversation(self, conversation: tuple[Message, ...]) -> None:
        """The conversation is ``conversation`` from now on (a context strategy's rewrite)."""
        self.conversation = conversation
        self.added = []

    def whole_conversation(self) -> tuple[Message, ...]:
        """The conversation as it stands (joined: a rewrite reads it all)."""
        return self.conversation + tuple(self.added) if self.added else self.conversation

    def last_message(self) -> Message | None:
        """The conversation's last message, without joining it."""
        if self.added:
            return self.added[-1]
        return self.conversation[-1] if self.conversation else None

    def state_of(self, state: RunnerState) -> RunnerState:
        """``state`` with everything the facts changed: one new state, its other members kept.

        Built field by field rather than by ``dataclasses.replace`` (a transition is on every
        boundary's path); the import-time check below keeps the list whole.
        """
        return RunnerState(
            phase=self.phase,
            conversation=self.whole_conversation(),
            messages=state.messages + tuple(self.messages) if self.messages else state.messages,
            turns=self.turns,
            token_usage=self.token_usage,
            tool_calls=state.tool_calls + tuple(self.records) if self.records else state.tool_calls,
            pending=tuple(self.pending),
            final_output=self.final_output,
            success=self.success,
            retryable=state.retryable,
            budget_exceeded=state.budget_exceeded,
            loop_warned=state.loop_warned,
            loop_detected=state.loop_detected,
            pending_tool_result_text=self.pending_tool_result_text,
        )


_STATE_FIELDS = (
    "phase",
    "conversation",
    "messages",
    "turns",
    "token_usage",
    "tool_calls",
    "pending",
    "final_output",
    "success",
    "retryable",
    "budget_exceeded",
    "loop_warned",
    "loop_detected",
    "pending_tool_result_text",
)
if tuple(f.name for f in fields(RunnerState)) != _STATE_FIELDS:  # pragma: no cover
    raise TypeError(f"RunnerState's fields are not {_STATE_FIELDS}: update StateDraft.state_of")


def answered(draft: StateDraft, message: Message, usage: TokenUsage) -> None:
    """The model answered with ``message`` (``assistant/message``), spending ``usage``.

    Every answer counts a turn and adds its usage (RN-05); one that asks for tools opens a
    round with its calls pending. An answer without calls leaves the phase to ``finished``
    (its ``turn/end``) or to the runner's budget.
    """
    if draft.phase != "awaiting_model":
        raise Refused(
            f"an answer arrives at {draft.phase}: the runner cannot resume from a second answer"
        )
    calls = [block for block in message.content if isinstance(block, ToolUseBlock)]
    draft.turns += 1
    draft.token_usage = draft.token_usage + usage
    if calls:
        draft.phase = "executing_tools"
        draft.pending = [PendingCall(call=call) for call in calls]
        draft.pending_tool_result_text = None
    draft.append(message)


def uncommitted_call(draft: StateDraft, call_id: str) -> int:
    """The index of the open round's uncommitted call ``call_id`` in ``draft.pending``."""
    if draft.phase == "executing_tools":
        for index, candidate in enumerate(draft.pending):
            if candidate.call.id == call_id and candidate.commit is None:
                return index
    raise Refused(
        f"no uncommitted pending call with id {call_id!r}: the call is not pending in an open round"
    )


def committed(draft: StateDraft, commit: ToolCommit) -> None:
    """One call's result committed (``tool/result``): it is replayed, never run again (RN-06)."""
    index = uncommitted_call(draft, commit.block.tool_use_id)
    draft.pending[index] = _with_commit(draft.pending[index], commit)


_PENDING_FIELDS = ("call", "commit", "dispatched", "approval_request", "approval_decision")
if tuple(f.name for f in fields(PendingCall)) != _PENDING_FIELDS:  # pragma: no cover
    raise TypeError(f"PendingCall's fields are not {_PENDING_FIELDS}: update _with_commit")


def _with_commit(pending: PendingCall, commit: ToolCommit) -> PendingCall:
    """``replace(pending, commit=commit)``, each field passed by name (``replace`` was a
    fifth of a ``tool/result``'s fold); the import-time check above keeps the list whole."""
    return PendingCall(
        call=pending.call,
        commit=commit,
        dispatched=pending.dispatched,
        approval_request=pending.approval_request,
        approval_decision=pending.approval_decision,
    )


def results_message(draft: StateDraft) -> Message:
    """The user message that returns the open round's results, as OMA builds it (RN-04 #3).

    The committed result blocks in call order, then ``pending_tool_result_text`` (a loop
    warning) when the round has one.
    """
    blocks: list[ContentBlock] = []
    for item in draft.pending:
        if item.commit is None:
            raise Refused("tool results requested while calls are still uncommitted")
        blocks.append(item.commit.block)
    if draft.pending_tool_result_text is not None:
        blocks.append(TextBlock(draft.pending_tool_result_text))
    return Message("user", blocks)


def returned(draft: StateDraft, message: Message) -> None:
    """The round's results went back to the model in ``message`` (``user/message`` of origin
    ``tool_results``): each commit's record joins ``tool_calls`` and its delegated usage the
    task's usage, and the next step asks the model again."""
    if draft.phase != "executing_tools":
        raise Refused("no tool round open")
    pending = draft.pending
    answers = [b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock)]
    commits = [item.commit for item in pending]
    if answers != [item.call.id for item in pending] or None in commits:
        raise Refused(
            f"the results answer {answers} but the open round has "
            f"{[item.call.id for item in pending]} with commits for "
            f"{[item.call.id for item in pending if item.commit]}: the runner cannot resume "
            "from that state"
        )
    for commit in commits:
        if commit is None:  # pragma: no cover - refused above
            continue
        if commit.delegation_usage is not None:
            draft.token_usage = draft.token_usage + commit.delegation_usage
        draft.records.append(commit.record)
    draft.phase = "awaiting_model"
    draft.pending = []
    draft.pending_tool_result_text = None
    draft.append(message)


def prompted(draft: StateDraft, message: Message) -> None:
    """The caller went on with a user message (a repair request, a continued conversation)."""
    if draft.phase == "executing_tools":
        raise Refused(
            "a user message arrives while a tool round is open: the runner cannot resume "
            "from that state"
        )
    draft.phase = "awaiting_model"
    draft.final_output = ""
    draft.append(message)


def check_rewrite(draft: StateDraft) -> None:
    """Refuse a rewrite of the conversation anywhere but before a model call."""
    if draft.phase != "awaiting_model":
        raise Refused(
            f"a rewrite arrives at {draft.phase}: a strategy rewrites the conversation only "
            "before a model call"
        )


def rewritten(draft: StateDraft, conversation: tuple[Message, ...], usage: TokenUsage) -> None:
    """A context strategy rewrote the conversation (``context/replace``); what it spent counts.

    Only the conversation (what the model is sent) changes: the messages, the task's
    transcript, keep every message. The spend can exceed a budget only together with the next
    answer's (OMA checks the budget after a response).
    """
    check_rewrite(draft)
    draft.replace_conversation(conversation)
    draft.token_usage = draft.token_usage + usage


def finished(draft: StateDraft) -> None:
    """The answer before was the task's final answer (``turn/end`` completed): the runner's
    terminal state, its text the final output, ``success``."""
    last = draft.last_message()
    answer = final_answer((last,) if last is not None else ())
    if draft.phase != "awaiting_model" or answer is None:
        raise Refused(f"it closes no final answer (phase {draft.phase})")
    draft.phase = "completed"
    draft.final_output = answer
    draft.success = True


def final_answer(conversation: tuple[Message, ...]) -> str | None:
    """The text of ``conversation``'s final answer: its last message, from the assistant and
    asking for no tool; ``None`` when it does not end with one."""
    last = conversation[-1] if conversation else None
    if last is None or last.role != "assistant":
        return None
    if any(isinstance(block, ToolUseBlock) for block in last.content):
        return None
    return text_of(last.content)

"""How one journal event changes one in-flight entry (spec JR-14, JR-15, JR-16). No I/O.

Each rule takes an entry's draft and an event of that entry's task and agent above its mark, and
changes the draft, or raises ``TailRejected`` with the reason when the event does not fit the
state: then the whole tail is discarded (JR-16), never part of it. The transitions are the
runner's (``agents/turn.py``), restated over journal events because the checkpoint layer sits
below the agents: an assistant message opens a tool round with its calls pending, a
``tool/result`` commits one call, the user message with the results closes the round.

The rules work on an ``EntryDraft``, a mutable copy of the entry's changing members, frozen once
after the whole tail (``EntryDraft.freeze``): a fold of n events appends to lists instead of
copying the conversation and the dataclasses per event (that copying made a fold O(n^2)).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from oma_actors.clock import from_iso
from oma_actors.domain.inflight import PendingCall, ToolCommit
from oma_actors.domain.jsonforms import (
    block_from_json,
    message_from_json,
    record_from_json_once,
    usage_from_json,
)
from oma_actors.domain.messages import Message, TokenUsage, ToolResultBlock, ToolUseBlock, text_of
from oma_actors.domain.results import ToolCallRecord
from oma_actors.domain.snapshot import RunIdentity
from oma_actors.errors import CheckpointError
from oma_actors.journal.context_layout import apply_layout
from oma_actors.journal.event import (
    ASSISTANT_MESSAGE,
    CONTEXT_REPLACE,
    FOLDED_TYPES,
    RECORDED_RESULT,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.inflight import RunnerPhase
    from oma_actors.domain.snapshot import ConversationLineage, InFlightTask
    from oma_actors.domain.tasks import TaskState
    from oma_actors.journal.event import JournalEvent

__all__ = [
    "FOLDED_TYPES",
    "EntryDraft",
    "TailRejected",
    "apply_event",
    "check_resumable",
    "final_answer",
    "fold_event",
    "run_start",
    "task_status",
]


class TailRejected(Exception):
    """A journal event failed a fold check: the tail is discarded (spec JR-16)."""

    def __init__(self, reason: str, seq: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seq = seq


@dataclass(slots=True, kw_only=True)
class EntryDraft:
    """An in-flight entry while a tail folds into it: what the rules change, mutable.

    Messages, lineage and tool-call records the tail adds are collected in lists and joined to
    the entry's own once, by ``freeze``; a rewrite of the conversation (``context/replace``)
    replaces the conversation and its lineage it starts from.

    Attributes:
        base: the entry the fold started from.
        phase, turns, token_usage, final_output, success, pending_tool_result_text: the
            state's members.
        pending: the state's pending calls.
        conversation: the conversation the added messages follow (the entry's, or a rewrite's).
        lineage: its lineage (``None``: the entry keeps none).
        added: messages appended to the conversation since.
        added_lineage: per added message, its blocks' source seqs.
        messages: messages appended to the runner's messages (never rewritten).
        records: tool-call records appended to ``tool_calls``.
        journal_seq: the entry's mark (advanced by the fold, not by the rules).
    """

    base: InFlightTask
    phase: RunnerPhase
    turns: int
    token_usage: TokenUsage
    final_output: str
    success: bool
    pending_tool_result_text: str | None
    pending: list[PendingCall]
    conversation: tuple[Message, ...]
    lineage: ConversationLineage | None
    added: list[Message]
    added_lineage: list[tuple[tuple[int, ...] | None, ...]]
    messages: list[Message]
    records: list[ToolCallRecord]
    journal_seq: int | None

    @classmethod
    def of(cls, item: InFlightTask) -> EntryDraft:
        """A draft of ``item``, nothing added yet."""
        state = item.state
        return cls(
            base=item,
            phase=state.phase,
            turns=state.turns,
            token_usage=state.token_usage,
            final_output=state.final_output,
            success=state.success,
            pending_tool_result_text=state.pending_tool_result_text,
            pending=list(state.pending),
            conversation=state.conversation,
            lineage=item.conversation_lineage,
            added=[],
            added_lineage=[],
            messages=[],
            records=[],
            journal_seq=item.journal_seq,
        )

    def append(self, message: Message, seq: int) -> None:
        """Append ``message``, carried by event ``seq``, to the conversation and the messages."""
        self.added.append(message)
        self.messages.append(message)
        if self.lineage is not None:
            # Every block of a folded message comes from the event that carried it (JR-07).
            self.added_lineage.append(((seq,),) * len(message.content))

    def whole_conversation(self) -> tuple[tuple[Message, ...], ConversationLineage | None]:
        """The conversation as it stands, with its lineage (joined: a rewrite reads it all)."""
        conversation = self.conversation + tuple(self.added)
        lineage = None if self.lineage is None else self.lineage + tuple(self.added_lineage)
        return conversation, lineage

    def freeze(self) -> InFlightTask:
        """The entry with everything folded into it: one copy of each member that changed."""
        base = self.base
        state = base.state
        conversation, lineage = self.whole_conversation()
        state = replace(
            state,
            phase=self.phase,
            conversation=conversation,
            messages=state.messages + tuple(self.messages) if self.messages else state.messages,
            turns=self.turns,
            token_usage=self.token_usage,
            tool_calls=state.tool_calls + tuple(self.records) if self.records else state.tool_calls,
            pending=tuple(self.pending),
            final_output=self.final_output,
            success=self.success,
            pending_tool_result_text=self.pending_tool_result_text,
        )
        return replace(
            base, state=state, journal_seq=self.journal_seq, conversation_lineage=lineage
        )


def apply_event(item: InFlightTask, event: JournalEvent, *, enforce_lineage: bool) -> InFlightTask:
    """``item`` after ``event`` (one of ``FOLDED_TYPES``), its mark not yet advanced.

    One event: ``fold_event`` on a draft of ``item``, frozen. A fold of a tail keeps one draft
    per entry across all its events instead.

    Raises:
        TailRejected: the event does not fit the entry (the reason names the rule).
    """
    draft = EntryDraft.of(item)
    fold_event(draft, event, enforce_lineage=enforce_lineage)
    return draft.freeze()


def fold_event(draft: EntryDraft, event: JournalEvent, *, enforce_lineage: bool) -> None:
    """Fold ``event`` (one of ``FOLDED_TYPES``) into ``draft``, its mark not yet advanced.

    A rule checks before it changes anything, so a rejected event leaves ``draft`` as it was.

    Raises:
        TailRejected: the event does not fit the entry (the reason names the rule).
    """
    kind = event.type
    try:
        if kind == ASSISTANT_MESSAGE:
            _assistant(draft, event, enforce_lineage=enforce_lineage)
        elif kind == USER_MESSAGE:
            _user(draft, event, enforce_lineage=enforce_lineage)
        elif kind == TOOL_CALL:
            _tool_call(draft, event)
        elif kind == TOOL_RESULT:
            _tool_result(draft, event)
        elif kind == CONTEXT_REPLACE:
            _context_replace(draft, event)
        else:
            _turn_end(draft, event)
    except (KeyError, TypeError, ValueError, AttributeError, CheckpointError) as exc:
        where = f"{event.type} at seq {event.seq}"
        raise TailRejected(f"{where} is malformed: {exc!r}", event.seq) from None


def check_resumable(item: InFlightTask) -> None:
    """Refuse a folded entry the runner cannot resume from (spec JR-16).

    At ``awaiting_model`` the next step sends the conversation to the model, so it may not end
    with an assistant message (the model would be asked to answer itself).
    """
    state = item.state
    if state.phase == "awaiting_model" and state.conversation[-1].role == "assistant":
        raise TailRejected(
            f"task {item.task_id!r} would end at awaiting_model after an assistant message: "
            "the runner cannot resume from that state",
            item.journal_seq,
        )


def _where(draft: EntryDraft, event: JournalEvent) -> str:
    return f"{event.type} at seq {event.seq} (task {draft.base.task_id!r})"


def _message(
    event: JournalEvent,
    role: str,
    *,
    enforce_lineage: bool,
    pending: Sequence[PendingCall] = (),
) -> Message:
    raw = event.data["message"]
    content = raw.get("content") if isinstance(raw, dict) else None
    if isinstance(content, list) and _refers(content):
        # Journal-first results message (issue 19): its results are the entry's commits.
        committed = {p.call.id: p.commit.block for p in pending if p.commit is not None}
        message = Message(raw["role"], [_resolved(b, committed, event) for b in content])
    else:
        message = message_from_json(raw)
    if message.role != role:
        raise ValueError(f"message role {message.role!r} is not {role!r}")
    # A prompt or a seeded message is where lineage starts; everything else names its sources.
    origin = event.data.get("origin")
    if enforce_lineage and origin not in ("input", "seed") and not event.source_event_seqs:
        raise TailRejected(
            f"{event.type} at seq {event.seq} names no source events (sourceEventSeqs) and "
            "enforce_lineage is on",
            event.seq,
        )
    return message


def _is_reference(block: Any) -> bool:
    return isinstance(block, dict) and RECORDED_RESULT in block


def _refers(content: list[Any]) -> bool:
    """A block of ``content`` is a reference (``_is_reference``)."""
    # A plain loop: ``any`` over a generator was a fifth of a folded message's cost.
    for block in content:  # noqa: SIM110
        if isinstance(block, dict) and RECORDED_RESULT in block:
            return True
    return False


def _resolved(block: Any, commits: dict[str, ToolResultBlock], event: JournalEvent) -> Any:
    """A block of a results message: a reference (``RECORDED_RESULT``) is the committed block.

    Journal-first, a result's block is written once, in its ``tool/result`` (issue 19); the
    results message refers to it. The entry holds every call's commit by then (the round
    cannot close without them), so the block is the commit's, whether its ``tool/result`` is
    in this tail or under the snapshot.
    """
    if not _is_reference(block):
        return block_from_json(block)
    if block.get("type") != "tool_result":
        raise ValueError(f"a {block.get('type')!r} block cannot refer to a recorded result")
    call_id = block.get("tool_use_id")
    committed = commits.get(call_id) if isinstance(call_id, str) else None
    if committed is None:
        raise TailRejected(
            f"{event.type} at seq {event.seq} refers to the result of call {call_id!r} "
            f"(seq {block.get(RECORDED_RESULT)!r}), which the entry has not committed",
            event.seq,
        )
    return committed


def _context_replace(draft: EntryDraft, event: JournalEvent) -> None:
    """A context strategy's rewrite (``context_layout``): the conversation is rebuilt from
    ``detail.layout`` and a summary's usage (``detail.usage``) is added to the task's.

    An event without a layout (OMA's) cannot be rebuilt exactly: ``ValueError``, and the fold
    discards the tail (JR-16) rather than restore a conversation the model never saw.
    """
    if draft.phase != "awaiting_model":
        raise TailRejected(
            f"{_where(draft, event)} arrives at {draft.phase}: a strategy rewrites "
            "the conversation only before a model call",
            event.seq,
        )
    raw = event.data.get("replacements") or []
    if not isinstance(raw, list):
        raise ValueError(f"replacements must be a list, got {raw!r}")
    derived = [block_from_json(r["block"]) for r in raw]
    detail = event.data.get("detail")
    detail = detail if isinstance(detail, dict) else {}
    conversation, lineage = draft.whole_conversation()
    conversation, lineage = apply_layout(
        conversation, lineage, detail.get("layout"), derived, event.seq
    )
    usage = draft.token_usage + usage_from_json(detail.get("usage"))
    draft.conversation, draft.lineage = conversation, lineage
    draft.added, draft.added_lineage = [], []
    draft.token_usage = usage


def _turn_end(draft: EntryDraft, event: JournalEvent) -> None:
    turn = event.data["turn"]
    if not isinstance(turn, int) or isinstance(turn, bool):
        raise TypeError(f"turn {turn!r} is not an integer")
    outcome = event.data.get("outcome")
    if outcome == "error":
        # The model call failed: the turn it names was opened, never counted (RN-05).
        return
    if outcome == "completed":
        _final_answer(draft, event)
    draft.turns = max(draft.turns, turn)


def _final_answer(draft: EntryDraft, event: JournalEvent) -> None:
    """``turn/end`` completed: the assistant message before it was the task's final answer.

    The runner's terminal state (``agents/turn.py``): phase ``completed``, the answer's text as
    the final output, ``success``. The usage and the message were folded with the message; so a
    run's final answer needs no snapshot of its own (D14).
    """
    answer = final_answer(draft.whole_conversation()[0])
    if draft.phase != "awaiting_model" or answer is None:
        raise TailRejected(
            f"{_where(draft, event)} closes no final answer (phase {draft.phase})", event.seq
        )
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


def _assistant(draft: EntryDraft, event: JournalEvent, *, enforce_lineage: bool) -> None:
    if draft.phase != "awaiting_model":
        raise TailRejected(
            f"{_where(draft, event)} arrives at {draft.phase}: the runner cannot resume from "
            "a second answer",
            event.seq,
        )
    message = _message(event, "assistant", enforce_lineage=enforce_lineage)
    calls = [block for block in message.content if isinstance(block, ToolUseBlock)]
    usage = _added_usage(draft.token_usage, event.data.get("usage"))
    draft.turns += 1
    draft.token_usage = usage
    if calls:
        draft.phase = "executing_tools"
        draft.pending = [PendingCall(call=call) for call in calls]
        draft.pending_tool_result_text = None
    draft.append(message, event.seq)


def _added_usage(usage: TokenUsage, raw: Any) -> TokenUsage:
    """``usage + usage_from_json(raw)``, one value built when ``raw`` holds exact ints."""
    if type(raw) is dict:
        given, taken = raw.get("input_tokens", 0), raw.get("output_tokens", 0)
        if type(given) is int and type(taken) is int:
            return TokenUsage(usage.input_tokens + given, usage.output_tokens + taken)
    return usage + usage_from_json(raw)


def _tool_call(draft: EntryDraft, event: JournalEvent) -> None:
    raw = event.data["call"]
    if _plain_call(raw):
        # The block ``block_from_json`` would build, read off the object (only checked).
        call_id, name = raw["id"], raw["name"]
    else:
        call = block_from_json(raw)
        if not isinstance(call, ToolUseBlock):
            raise ValueError("call is not a tool_use block")
        call_id, name = call.id, call.name
    requested = False
    if draft.phase == "executing_tools":
        for pending in draft.pending:
            if pending.call.id == call_id and pending.call.name == name:
                requested = True
                break
    if not requested:
        raise TailRejected(
            f"{_where(draft, event)} for call {call_id!r}: no assistant turn requesting it",
            event.seq,
        )


def _plain_call(raw: Any) -> bool:
    """``raw`` is a ``tool_use`` block as the recorder writes it: ``block_from_json`` reads it
    without error to a ``ToolUseBlock`` of these very ``id`` and ``name``."""
    if type(raw) is not dict or raw.get("type") != "tool_use":
        return False
    given = raw.get("input")
    return (
        type(raw.get("id")) is str
        and type(raw.get("name")) is str
        and (type(given) is dict or not given)
    )


def _tool_result(draft: EntryDraft, event: JournalEvent) -> None:
    call_id = event.data["toolCallId"]
    block = block_from_json(event.data["result"])
    if not isinstance(block, ToolResultBlock) or block.tool_use_id != call_id:
        raise ValueError(f"result is not a tool_result block for {call_id!r}")
    index = None
    for i, candidate in enumerate(draft.pending):
        if candidate.call.id == call_id and candidate.commit is None:
            index = i
            break
    if draft.phase != "executing_tools" or index is None:
        raise TailRejected(
            f"{_where(draft, event)}: call {call_id!r} is not pending (uncommitted) in the entry",
            event.seq,
        )
    pending = draft.pending[index]
    commit = ToolCommit(
        block=block,
        record=_record(event.data.get("record"), pending.call, block),
        delegation_usage=(
            usage_from_json(event.data["delegationUsage"])
            if event.data.get("delegationUsage") is not None
            else None
        ),
    )
    draft.pending[index] = _committed(pending, commit)


_PENDING_FIELDS = ("call", "commit", "dispatched", "approval_request", "approval_decision")
if tuple(f.name for f in fields(PendingCall)) != _PENDING_FIELDS:  # pragma: no cover
    raise TypeError(f"PendingCall's fields are not {_PENDING_FIELDS}: update _committed")


def _committed(pending: PendingCall, commit: ToolCommit) -> PendingCall:
    """``replace(pending, commit=commit)``, each field passed by name (``replace`` was a
    fifth of a ``tool/result``'s fold); the import-time check above keeps the list whole."""
    return PendingCall(
        call=pending.call,
        commit=commit,
        dispatched=pending.dispatched,
        approval_request=pending.approval_request,
        approval_decision=pending.approval_decision,
    )


def _record(raw: Any, call: ToolUseBlock, block: ToolResultBlock) -> ToolCallRecord:
    if raw is None:  # ``record`` is optional on OMA's event: rebuild it from the call
        return ToolCallRecord(
            tool_name=call.name,
            input=dict(call.input),
            output=text_of(block.content),
            duration_ms=0,
            tool_call_id=call.id,
            is_error=block.is_error,
        )
    if not isinstance(raw, dict):
        raise TypeError(f"record is not an object: {raw!r}")
    if not raw or (len(raw) == 1 and type(raw.get("duration")) is int):
        # Journal-first's usual record, its duration alone: what ``record_from_json_once``
        # builds from its call and its result, without copying the object first.
        return ToolCallRecord(
            tool_name=call.name,
            input=dict(call.input),
            output=text_of(block.content),
            duration_ms=raw.get("duration", 0),
            tool_call_id=call.id,
            is_error=block.is_error,
        )
    # Journal-first, the record leaves out what its call and its result hold (issue 19).
    return record_from_json_once(raw, call, block)


def _user(draft: EntryDraft, event: JournalEvent, *, enforce_lineage: bool) -> None:
    message = _message(event, "user", enforce_lineage=enforce_lineage, pending=draft.pending)
    answers = [b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock)]
    if event.data.get("origin") != "tool_results" and not answers:
        if draft.phase == "executing_tools":
            raise TailRejected(
                f"{_where(draft, event)} arrives while a tool round is open: the runner "
                "cannot resume from that state",
                event.seq,
            )
        draft.phase = "awaiting_model"
        draft.final_output = ""
        draft.append(message, event.seq)
        return
    if draft.phase != "executing_tools":
        raise TailRejected(f"{_where(draft, event)}: no tool round open", event.seq)
    pending = draft.pending
    commits = [p.commit for p in pending]
    if answers != [p.call.id for p in pending] or None in commits:
        raise TailRejected(
            f"{_where(draft, event)} answers {answers} but the open round has "
            f"{[p.call.id for p in pending]} with commits for "
            f"{[p.call.id for p in pending if p.commit]}: the runner cannot resume "
            "from that state",
            event.seq,
        )
    done = [commit for commit in commits if commit is not None]
    for commit in done:
        if commit.delegation_usage is not None:
            draft.token_usage = draft.token_usage + commit.delegation_usage
        draft.records.append(commit.record)
    draft.phase = "awaiting_model"
    draft.pending = []
    draft.pending_tool_result_text = None
    draft.append(message, event.seq)


# Run-level rules (D14): the facts of a run outside its in-flight entries that happen between
# compaction points. Each is applied only above the snapshot's watermark (the snapshot holds
# everything at or below it).


def task_status(
    task: TaskState, announced: set[str] | None, event: JournalEvent
) -> TaskState | None:
    """The task after a ``task/status`` event, or ``None`` when the event changes nothing.

    ``in_progress`` with ``updatedAt`` (journal-first mode): the queue started the task on the
    event's agent at that moment. Without ``updatedAt`` (OMA's event) the start is not folded:
    the stamp could not be restored exactly, and OMA's mode saves a snapshot per boundary.
    ``completed``: the completion was announced (it is added to ``announced``); the snapshot of
    the completion holds the status and the result. Other statuses are written at compaction
    points and change nothing here.

    Raises:
        TailRejected: a start of a task that is already terminal, or a malformed stamp.
    """
    status = event.data.get("status")
    if status == "completed":
        if announced is not None and task.status == "completed":
            announced.add(task.id)
        return None
    stamp = event.data.get("updatedAt")
    if status != "in_progress" or stamp is None:
        return None
    if task.is_terminal:
        raise TailRejected(
            f"{event.type} at seq {event.seq} starts task {task.id!r}, which is {task.status}",
            event.seq,
        )
    try:
        moment = from_iso(stamp) if isinstance(stamp, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise TailRejected(
            f"{event.type} at seq {event.seq}: updatedAt {stamp!r} is not an ISO timestamp",
            event.seq,
        )
    return replace(
        task, status="in_progress", assignee=event.agent_name or task.assignee, updated_at=moment
    )


def run_start(identity: RunIdentity, event: JournalEvent) -> RunIdentity:
    """The run's identity after a ``run/start`` event above the watermark.

    A journal-first restore records its attempt as ``run/start`` carrying the new identity
    (attempt and trace ids, the snapshot's form); that append is the attempt's admission (D14).
    A ``run/start`` without it (OMA's, a fresh run's, OMA's mode) changes nothing.

    Raises:
        TailRejected: the identity is malformed, names another run, or does not raise the
            attempt (attempts only ever grow).
    """
    raw = event.data.get("identity")
    if raw is None:
        return identity
    seq = event.seq
    if not isinstance(raw, dict):
        raise TailRejected(f"{event.type} at seq {seq}: identity is not an object", seq)
    attempt = raw.get("attempt")
    trace_id, span_id = raw.get("lastTraceId"), raw.get("lastRootSpanId")
    if (
        not isinstance(attempt, int)
        or isinstance(attempt, bool)
        or not isinstance(trace_id, str)
        or not isinstance(span_id, str)
    ):
        raise TailRejected(f"{event.type} at seq {seq}: malformed identity {raw!r}", seq)
    if raw.get("runId", identity.run_id) != identity.run_id:
        raise TailRejected(
            f"{event.type} at seq {seq}: identity of run {raw.get('runId')!r}, "
            f"not {identity.run_id!r}",
            seq,
        )
    if attempt <= identity.attempt:
        raise TailRejected(
            f"{event.type} at seq {seq}: attempt {attempt} does not follow {identity.attempt}",
            seq,
        )
    return RunIdentity(
        run_id=identity.run_id, attempt=attempt, trace_id=trace_id, root_span_id=span_id
    )

"""How one journal event changes one in-flight entry (spec JR-14, JR-15, JR-16). No I/O.

Each rule takes an entry's draft and an event of that entry's task and agent above its mark,
reads the event back into the fact it records and applies that fact's transition
(``journal.transitions``: the very rules the running run changes its state by, D14), or raises
``TailRejected`` with the reason when the event is malformed or does not fit the state: then the
whole tail is discarded (JR-16), never part of it. What is the fold's alone is reading events:
a results message's references to recorded results, lineage, a context rewrite's layout, the
checks a ``tool/call`` makes.

The rules work on an ``EntryDraft``, a ``StateDraft`` of the entry with its lineage, frozen once
after the whole tail (``EntryDraft.freeze``): a fold of n events appends to lists instead of
copying the conversation and the dataclasses per event (that copying made a fold O(n^2)).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from oma_actors.clock import from_iso
from oma_actors.domain.inflight import ToolCommit
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
from oma_actors.journal.transitions import (
    Refused,
    StateDraft,
    answered,
    check_rewrite,
    committed,
    finished,
    prompted,
    returned,
    rewritten,
    uncommitted_call,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.inflight import PendingCall
    from oma_actors.domain.snapshot import ConversationLineage, InFlightTask
    from oma_actors.domain.tasks import TaskState
    from oma_actors.journal.event import JournalEvent

__all__ = [
    "FOLDED_TYPES",
    "EntryDraft",
    "TailRejected",
    "apply_event",
    "check_resumable",
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
class EntryDraft(StateDraft):
    """An in-flight entry while a tail folds into it: a ``StateDraft`` of its runner state
    (what the shared rules change) with the entry's lineage.

    Per added message, the lineage gains its blocks' source seq: the event being folded
    (``seq``). A rewrite of the conversation (``context/replace``) replaces the lineage too.

    Attributes:
        base: the entry the fold started from.
        lineage: the conversation's lineage before the added messages (``None``: the entry
            keeps none).
        added_lineage: per added message, its blocks' source seqs.
        journal_seq: the entry's mark (advanced by the fold, not by the rules).
        seq: the seq of the event being folded.
    """

    base: InFlightTask
    lineage: ConversationLineage | None
    added_lineage: list[tuple[tuple[int, ...] | None, ...]]
    journal_seq: int | None
    seq: int = 0

    @classmethod
    def of_entry(cls, item: InFlightTask) -> EntryDraft:
        """A draft of ``item``, nothing added yet."""
        return cls.of(
            item.state,
            base=item,
            lineage=item.conversation_lineage,
            added_lineage=[],
            journal_seq=item.journal_seq,
        )

    def append(self, message: Message) -> None:
        """Append ``message``, carried by the event being folded, with its lineage."""
        self.added.append(message)
        self.messages.append(message)
        if self.lineage is not None:
            # Every block of a folded message comes from the event that carried it (JR-07).
            self.added_lineage.append(((self.seq,),) * len(message.content))

    def replace_conversation(self, conversation: tuple[Message, ...]) -> None:
        """The conversation is ``conversation`` from now on; its lineage is the fold's to set."""
        self.conversation = conversation
        self.added = []
        self.added_lineage = []

    def whole_lineage(self) -> ConversationLineage | None:
        """The lineage of ``whole_conversation``."""
        return None if self.lineage is None else self.lineage + tuple(self.added_lineage)

    def freeze(self) -> InFlightTask:
        """The entry with everything folded into it: one copy of each member that changed."""
        base = self.base
        return replace(
            base,
            state=self.state_of(base.state),
            journal_seq=self.journal_seq,
            conversation_lineage=self.whole_lineage(),
        )


def apply_event(item: InFlightTask, event: JournalEvent, *, enforce_lineage: bool) -> InFlightTask:
    """``item`` after ``event`` (one of ``FOLDED_TYPES``), its mark not yet advanced.

    One event: ``fold_event`` on a draft of ``item``, frozen. A fold of a tail keeps one draft
    per entry across all its events instead.

    Raises:
        TailRejected: the event does not fit the entry (the reason names the rule).
    """
    draft = EntryDraft.of_entry(item)
    fold_event(draft, event, enforce_lineage=enforce_lineage)
    return draft.freeze()


def fold_event(draft: EntryDraft, event: JournalEvent, *, enforce_lineage: bool) -> None:
    """Fold ``event`` (one of ``FOLDED_TYPES``) into ``draft``, its mark not yet advanced.

    A rule checks before it changes anything, so a rejected event leaves ``draft`` as it was.

    Raises:
        TailRejected: the event does not fit the entry (the reason names the rule).
    """
    kind = event.type
    draft.seq = event.seq
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
    except Refused as refused:
        raise TailRejected(f"{_where(draft, event)}: {refused.reason}", event.seq) from None
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
    check_rewrite(draft)
    raw = event.data.get("replacements") or []
    if not isinstance(raw, list):
        raise ValueError(f"replacements must be a list, got {raw!r}")
    derived = [block_from_json(r["block"]) for r in raw]
    detail = event.data.get("detail")
    detail = detail if isinstance(detail, dict) else {}
    conversation, lineage = apply_layout(
        draft.whole_conversation(), draft.whole_lineage(), detail.get("layout"), derived, event.seq
    )
    rewritten(draft, conversation, usage_from_json(detail.get("usage")))
    draft.lineage = lineage


def _turn_end(draft: EntryDraft, event: JournalEvent) -> None:
    turn = event.data["turn"]
    if not isinstance(turn, int) or isinstance(turn, bool):
        raise TypeError(f"turn {turn!r} is not an integer")
    outcome = event.data.get("outcome")
    if outcome == "error":
        # The model call failed: the turn it names was opened, never counted (RN-05).
        return
    if outcome == "completed":
        # The answer before was the task's final answer: a run's final answer needs no
        # snapshot of its own (D14).
        finished(draft)
    draft.turns = max(draft.turns, turn)


def _assistant(draft: EntryDraft, event: JournalEvent, *, enforce_lineage: bool) -> None:
    message = _message(event, "assistant", enforce_lineage=enforce_lineage)
    answered(draft, message, _usage(event.data.get("usage")))


def _usage(raw: Any) -> TokenUsage:
    """``usage_from_json(raw)``, built at once when ``raw`` holds exact ints (the usual)."""
    if type(raw) is dict:
        given, taken = raw.get("input_tokens", 0), raw.get("output_tokens", 0)
        if type(given) is int and type(taken) is int:
            return TokenUsage(given, taken)
    return usage_from_json(raw)


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
    call = draft.pending[uncommitted_call(draft, call_id)].call
    committed(
        draft,
        ToolCommit(
            block=block,
            record=_record(event.data.get("record"), call, block),
            delegation_usage=(
                usage_from_json(event.data["delegationUsage"])
                if event.data.get("delegationUsage") is not None
                else None
            ),
        ),
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
    if event.data.get("origin") != "tool_results" and not any(
        isinstance(block, ToolResultBlock) for block in message.content
    ):
        prompted(draft, message)
    else:
        returned(draft, message)


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

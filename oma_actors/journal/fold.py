"""Folding a run journal's tail into a v5 snapshot (spec 17.3, JR-11..JR-17). Pure: no I/O.

The snapshot stays the recovery anchor (JR-20); the tail only adds what happened after it was
built. Which events belong to an entry: those of its task AND its agent (``agentName ==
assignee``; delegated children and other tasks are ignored, JR-13) above its mark (its
``journalSeq``, or the snapshot's watermark when it has none; an event at or below it is already
in the entry and is skipped, JR-12). What is folded: assistant and user messages, ``turn/end``,
``tool/call`` and ``tool/result`` (JR-14; ``fold_rules``), and, above the snapshot's watermark,
the run-level facts a journal-first run records between compactions (D14): a task's start
(``task/status`` ``in_progress`` with our ``updatedAt``: status, assignee, stamp) and a
completion's announcement (``task/status`` ``completed``: ``announced``). OMA's ``task/status``
has no ``updatedAt`` and stays unfolded, as JR-14 says. Every other type is ignored and leaves the
tail usable. A tail that fails any check is discarded as a whole (JR-16): the result is the
snapshot as it was, with the reason for the ``JOURNAL_TAIL_DISCARDED`` warning (JR-17). A torn
trailing line never reaches this module: the journal backend treats it as not written (D6).

Dispatched calls (decision D1). A discarded tail must not hide that a call started: both results
carry ``started_calls``, every call the tail shows as started (a ``tool/call``, emitted before
execution and a strict append for an unsafe tool in durable mode, or a ``tool/result``).
Restore must not run again an unsafe call that is in it and uncommitted in the state it resumes
(the folded one, or the snapshot's after a discard): it fails that call closed
(``TOOL_OUTCOME_UNKNOWN``), exactly as for a snapshot's ``dispatched`` mark.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from oma_actors.domain.inflight import RunnerState
from oma_actors.domain.snapshot import InFlightTask, RunIdentity
from oma_actors.gc_pause import gc_paused
from oma_actors.journal.event import RUN_START, TASK_STATUS, TOOL_CALL, TOOL_RESULT, USER_MESSAGE
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.journal.fold_rules import (
    FOLDED_TYPES,
    EntryDraft,
    TailRejected,
    check_resumable,
    fold_event,
    run_start,
    task_status,
)
from oma_actors.journal.ref import DURABLE_MEMBER

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.domain.tasks import TaskState
    from oma_actors.journal.event import JournalEvent

JOURNAL_TAIL_DISCARDED = "JOURNAL_TAIL_DISCARDED"


@dataclass(frozen=True, slots=True, kw_only=True)
class StartedCall:
    """A tool call the journal tail shows as started (decision D1).

    Attributes:
        task_id: the event's task.
        agent_name: the event's agent (a delegated child's calls carry the child's name).
        call_id: the model-issued tool call id.
        seq: the first event of the tail that shows it started.
        has_result: the tail also holds its ``tool/result``: its effect happened.
    """

    task_id: str | None
    agent_name: str | None
    call_id: str
    seq: int
    has_result: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Folded:
    """The tail was folded (or there was nothing to fold).

    Attributes:
        snapshot: the snapshot with the tail folded into its in-flight entries, each folded
            entry's ``journal_seq`` at its last folded event; it carries the v5 fields, so its
            re-save is v5. For a snapshot below v5 (no tail replay, JR-11): the snapshot as given.
        folded_events: how many events changed an entry.
        started_calls: every call the tail shows as started (see the module docstring).
    """

    snapshot: CheckpointSnapshot
    folded_events: int
    started_calls: tuple[StartedCall, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Discarded:
    """The tail failed a fold check and none of it was folded (spec JR-16, JR-17).

    Attributes:
        snapshot: the snapshot as it was (its v5 fields read into the typed ones); the run
            resumes from it alone, as without a journal.
        reason: why, naming the event and the rule (the warning's ``reason``).
        seq: the event that failed, when one did.
        started_calls: every call the tail shows as started, folded or not (decision D1).
        code: ``JOURNAL_TAIL_DISCARDED``, the warning's code.
    """

    code: ClassVar[str] = JOURNAL_TAIL_DISCARDED

    snapshot: CheckpointSnapshot
    reason: str
    seq: int | None = None
    started_calls: tuple[StartedCall, ...] = ()

    @property
    def folded_events(self) -> int:
        """Always 0: a discarded tail folds nothing."""
        return 0


FoldResult = Folded | Discarded


def tail_read_from(snapshot: CheckpointSnapshot) -> int:
    """The first seq the tail fold needs (OMA's ``journalTailReadFrom``, spec JR-12).

    The lowest entry mark plus one, an entry without a mark counting as the watermark (entry
    mark 100 -> 101; no mark with watermark 105 -> 106). A snapshot without the v5 fields: 1.
    """
    snapshot = adopt_journal_fields(snapshot)
    watermark = snapshot.journal_watermark_seq
    if watermark is None:
        return 1
    marks = [item.journal_seq for item in snapshot.in_flight]
    return min((watermark if mark is None else mark for mark in marks), default=watermark) + 1


def fold_tail(
    snapshot: CheckpointSnapshot,
    events: Sequence[JournalEvent],
    *,
    enforce_lineage: bool = False,
    started_calls: bool = True,
) -> FoldResult:
    """Fold the journal ``events`` (read from ``tail_read_from(snapshot)``) into ``snapshot``.

    Args:
        snapshot: the restored snapshot (its v5 members are read from its source if needed).
        events: the tail in journal order; events at or below an entry's mark are skipped, so
            reading from further back is harmless.
        enforce_lineage: a folded message that is not a prompt must name its source events
            (``sourceEventSeqs``), or the tail is discarded (spec JR-09's rule for the fold).
        started_calls: list the calls the tail shows as started; ``False``: the result's
            ``started_calls`` is empty (a caller that only wants the state, ``state_at``).

    Returns:
        ``Folded``, or ``Discarded`` with the reason when any check failed (JR-16).
    """
    snapshot = adopt_journal_fields(snapshot)
    started = _started_calls(events) if started_calls else ()
    if snapshot.journal_watermark_seq is None:
        return Folded(snapshot=snapshot, folded_events=0, started_calls=started)
    try:
        with gc_paused():  # the folded conversation is many new containers, no garbage
            folded_snapshot, folded = _fold(snapshot, events, enforce_lineage=enforce_lineage)
    except TailRejected as rejected:
        return Discarded(
            snapshot=snapshot, reason=rejected.reason, seq=rejected.seq, started_calls=started
        )
    return Folded(snapshot=folded_snapshot, folded_events=folded, started_calls=started)


def _fold(
    snapshot: CheckpointSnapshot, events: Sequence[JournalEvent], *, enforce_lineage: bool
) -> tuple[CheckpointSnapshot, int]:
    watermark = snapshot.journal_watermark_seq or 0
    entries = {(item.task_id, item.assignee): item for item in snapshot.in_flight}
    # Only a journal-first run's tail opens conversations (issue 19: its tasks' admissions are
    # journal-only); OMA's mode keeps OMA's fold, where a task without an entry starts over.
    ref = snapshot.journal_ref
    opens = ref is not None and ref.get(DURABLE_MEMBER) is True
    # One mutable draft per entry the tail changes, frozen once at the end: no per-event copy.
    drafts: dict[tuple[str, str], EntryDraft] = {}
    # The run-level facts (D14): task starts and announcements.
    tasks = {task.id: task for task in snapshot.tasks}
    started: dict[str, TaskState] = {}
    announced = set(snapshot.announced) if snapshot.announced is not None else None
    run_id = snapshot.run_id
    # The attempt (D14): a journal-first restore's admission is its ``run/start``.
    identity = snapshot.identity or RunIdentity(
        run_id=run_id, attempt=snapshot.attempt, trace_id="", root_span_id=""
    )
    count = 0
    previous: int | None = None
    for event in events:
        seq = event.seq
        if previous is not None and seq <= previous:
            raise TailRejected(
                f"journal seq {seq} follows seq {previous}: a journal is append-only, "
                "its seqs strictly increase",
                seq,
            )
        previous = seq
        if run_id and event.run_id != run_id:
            raise TailRejected(
                f"event at seq {seq} belongs to run {event.run_id!r}, not to {run_id!r}",
                seq,
            )
        kind = event.type
        if kind == RUN_START:
            if seq > watermark:
                identity = run_start(identity, event)
            continue
        if kind == TASK_STATUS:
            task = started.get(event.task_id or "") or tasks.get(event.task_id or "")
            if seq > watermark and task is not None:
                changed = task_status(task, announced, event)
                if changed is not None:
                    started[task.id] = changed
            continue
        if kind not in FOLDED_TYPES:
            continue  # a type the fold does not use
        key = (event.task_id or "", event.agent_name or "")
        draft = drafts.get(key)
        opened = False
        if draft is None:
            item = entries.get(key)
            if item is None:
                task = started.get(key[0]) or tasks.get(key[0])
                item = _opened(event, watermark, task) if opens else None
                if item is None:
                    if opens and _continues_unheld(event, watermark, tasks.get(key[0]), started):
                        raise TailRejected(
                            f"the journal continues the conversation of task {key[0]!r} "
                            f"({key[1]}) at seq {seq}, which the snapshot does not hold and "
                            "the tail does not open (a snapshot of an older version): folded "
                            "without it, the task would start over and run its calls again",
                            seq,
                        )
                    continue  # another task or a delegated child
                entries[key] = item
                opened = True
            mark = watermark if item.journal_seq is None else item.journal_seq
            if seq <= mark:
                continue  # already in the entry (JR-12)
            draft = drafts[key] = EntryDraft.of_entry(item)
        elif seq <= (watermark if draft.journal_seq is None else draft.journal_seq):
            continue  # already in the entry (JR-12)
        fold_event(draft, event, enforce_lineage=enforce_lineage)
        if opened:
            draft.messages.clear()  # the prompt starts the conversation, not the messages
        draft.journal_seq = seq
        count += 1
    for key, draft in drafts.items():
        entries[key] = draft.freeze()
    # The snapshot's entries in its order, then the conversations the tail opened, in theirs,
    # one holding only its prompt too: a snapshot holds such a conversation from its prompt on
    # (``RunJournaling.opened``), so its later events fold onto it wherever the snapshot is.
    folded = tuple(entries.values())
    for item in folded:
        if (item.task_id, item.assignee) in drafts:
            check_resumable(item)
    changes: dict[str, object] = {"in_flight": folded}
    if identity.attempt != snapshot.attempt:
        changes["attempt"] = identity.attempt
        changes["identity"] = identity
    if started:
        changes["tasks"] = tuple(started.get(task.id, task) for task in snapshot.tasks)
    if announced is not None and len(announced) != len(snapshot.announced or ()):
        # Sorted, as the run writes it: the announcements are a set.
        changes["announced"] = tuple(sorted(announced))
    return replace(snapshot, **changes), count  # type: ignore[arg-type]


def _continues_unheld(
    event: JournalEvent, watermark: int, task: TaskState | None, started: Mapping[str, TaskState]
) -> bool:
    """Whether ``event`` goes on with a conversation a journal-first snapshot lost.

    The snapshot's task is in progress under the event's agent, holds no entry for it, and the
    tail neither started it again nor opened it from a prompt: its conversation began below
    the watermark, where this snapshot's writer recorded it in an entry (the fold then skips
    what the entry holds). Versions before 66e1187 could leave a started task out of a
    compaction; dropping its later events would run its committed calls again.
    """
    return (
        event.seq > watermark
        and task is not None
        and task.status == "in_progress"
        and task.id not in started
        and event.agent_name is not None
        and task.assignee == event.agent_name
    )


def _opened(event: JournalEvent, watermark: int, task: TaskState | None) -> InFlightTask | None:
    """A new, empty entry for the conversation ``event`` opens, or ``None`` (D14, issue 19).

    A journal-first task's conversation starts journal-only: its start (``task/status`` in
    progress, folded into ``task``) and then its prompt (``user/message`` of origin ``input``)
    above the watermark open its entry; any other event of a task without an entry is another
    task's or a delegated child's and is not folded (JR-13).
    """
    if (
        event.seq <= watermark
        or event.type != USER_MESSAGE
        or event.data.get("origin") != "input"
        or task is None
        or task.status != "in_progress"
        or task.assignee != event.agent_name
        or event.agent_name is None
    ):
        return None
    return InFlightTask(
        task_id=task.id,
        assignee=event.agent_name,
        state=RunnerState(phase="awaiting_model", conversation=()),
        journal_seq=watermark,
        conversation_lineage=(),
    )


def _started_calls(events: Sequence[JournalEvent]) -> tuple[StartedCall, ...]:
    """Every call a ``tool/call`` or ``tool/result`` of ``events`` shows as started.

    Read leniently (a malformed event is skipped), because this must hold for a tail the fold
    refuses too.
    """
    # Each call's first seq and whether a result showed, by first appearance; one
    # ``StartedCall`` per call at the end (a long tail shows thousands of calls).
    first: dict[tuple[str | None, str | None, str], int] = {}
    results: set[tuple[str | None, str | None, str]] = set()
    for event in events:
        kind = event.type
        if kind == TOOL_CALL:
            call = event.data.get("call")
            call_id = call.get("id") if isinstance(call, dict) else None
        elif kind == TOOL_RESULT:
            call_id = event.data.get("toolCallId")
        else:
            continue
        if not isinstance(call_id, str):
            continue
        key = (event.task_id, event.agent_name, call_id)
        first.setdefault(key, event.seq)
        if kind == TOOL_RESULT:
            results.add(key)
    return tuple(
        StartedCall(
            task_id=task_id,
            agent_name=agent_name,
            call_id=call_id,
            seq=seq,
            has_result=(task_id, agent_name, call_id) in results,
        )
        for (task_id, agent_name, call_id), seq in first.items()
    )

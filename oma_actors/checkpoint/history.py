"""A journal-first run's history: every restorable point, and the state at each (decision D17).

Journal-first (D10) saves a per-turn boundary by its journal events alone and writes the whole
snapshot only at compaction points; each compaction also keeps a copy, the run's **anchors**
(``checkpoint.anchors``). So every boundary of every attempt can be rebuilt: the anchor at or
below it, folded with the run's journal events up to it by the fold a restore runs
(``fold_tail``).

The points, oldest first:

- each anchor, at its watermark (its boundary is the one the writer named when it compacted);
- between two anchors, each event that closes a per-turn boundary of a task the earlier anchor
  holds in flight: an ``assistant/message`` asking for tools (``assistant_tool_turn``), a
  ``tool/call`` (``tool_dispatch``), a ``tool/result`` (``tool_commit``), a ``turn/end`` of a
  tool round (``tool_results``: the results message and the turn's end are one boundary) and a
  ``turn/end`` completed (``terminal``: a final answer, folded since D14 carries it; when the
  task's completion compacts at the same seq, that anchor is the point).

The newest anchor may be the run's latest snapshot itself (its metadata carries the summary,
``checkpoint.anchors``); it is read as the others are. A fold to one point (``state_at``,
``fork_run``) starts from the newest stored state below it: the anchor, or the latest snapshot
when that is a nearer compaction of the same line of attempts (an interrupted run's; what a
restore folds from), so a late point costs about a restore.

A safe tool's ``tool/call`` is recorded just before its result, in the same boundary; the
journal cannot tell it from an unsafe call's dispatch record, so it is a point too, whose state
is the one before it (a fold of ``tool/call`` changes nothing).

The journal is the one passed, or the one the anchors name (``journalRef``, opened as a restore
opens it: ``open_journal_ref``, a JSONL file or the store's own database journal).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, get_args

from oma_actors.checkpoint.anchors import SUMMARY, AnchorSummary, history_entries, summarize
from oma_actors.checkpoint.codec import decode
from oma_actors.clock import from_iso
from oma_actors.domain.inflight import BoundaryKind
from oma_actors.errors import CheckpointError, NoHistoryError, NotAHistoryPointError
from oma_actors.gc_pause import gc_paused
from oma_actors.journal.base import read_run_range
from oma_actors.journal.codec import slot_setters
from oma_actors.journal.event import (
    ASSISTANT_MESSAGE,
    FOLDED_TYPES,
    RUN_START,
    TASK_STATUS,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
)
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.journal.fold import Discarded, StartedCall, fold_tail, tail_read_from
from oma_actors.journal.ref import THROUGH_MEMBER, open_journal_ref
from oma_actors.keyspace import checkpoint_key, history_key

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.journal.base import RunJournal
    from oma_actors.journal.event import JournalEvent
    from oma_actors.stores.base import MemoryStore


POINT_TYPES = frozenset({ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, TASK_STATUS})
"""The event types that can close a per-turn boundary (the points between anchors), and the
task start that names the assignee of a conversation opened between two anchors (issue 19: a
task's start compacts no more)."""
_LABEL_READS = frozenset({ASSISTANT_MESSAGE, TASK_STATUS})
"""What a fold to one point reads of the events before it to label it (``_points``)."""
_FOLD_READS = FOLDED_TYPES | {TASK_STATUS, RUN_START}
"""What ``fold_tail`` reads: the entries' types and the run-level facts (D14): task statuses
and an attempt's admission (so a point a restored attempt reached names that attempt)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryPoint:
    """One restorable point of a run (``state_at(seq)`` rebuilds it, ``fork_run`` starts there).

    Attributes:
        seq: the journal watermark of the point: every event of the run up to it is in it.
        attempt: the attempt that reached it.
        boundary: the boundary's name (``tool_commit``, ``task_completed``, ...).
        task_id: the task whose state the boundary records, if one.
        at: when it was reached (the event's time, or the anchor's ``createdAt``).
        label: one line for people, e.g. ``"t2 turn 3: tool search committed"``.
    """

    seq: int
    attempt: int
    boundary: str
    task_id: str | None
    at: datetime
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTimeline:
    """A run's anchors from one on, the run's journal events above them, and their points.

    Attributes:
        run_id: the run.
        anchors: the anchors' summaries, by watermark.
        values: each anchor's stored snapshot text, by key (decoded only to fold from it).
        decoded: the anchors already decoded, by key (the run's latest snapshot, when a fold
            to one point starts from it).
        events: the run's own events from the first anchor's ``read_from`` (or its watermark,
            if lower) on, of the types that make points (a listing) or that a fold reads (a
            fold to one point).
        points: the history points they make, oldest first (a fold to one point: the
            anchors' and that point alone).
    """

    run_id: str
    anchors: tuple[AnchorSummary, ...]
    values: dict[str, str]
    events: tuple[JournalEvent, ...]
    points: tuple[HistoryPoint, ...]
    decoded: dict[str, CheckpointSnapshot] = field(default_factory=dict)

    def point(self, seq: int) -> HistoryPoint:
        """The point at ``seq``.

        Raises:
            NotAHistoryPointError: ``seq`` is not a point; it names the nearest ones.
        """
        seqs = [point.seq for point in self.points]
        index = bisect_right(seqs, seq)
        if index and seqs[index - 1] == seq:
            return self.points[index - 1]
        raise NotAHistoryPointError(self.run_id, seq, seqs[max(index - 1, 0) : index + 1])

    def fold_at(
        self, seq: int, *, started: bool = True
    ) -> tuple[CheckpointSnapshot, tuple[StartedCall, ...]]:
        """The state at the point ``seq``, and the calls its fold shows as started (with
        ``started=False``: none listed, for a caller that only wants the state).

        Raises:
            CheckpointError: ``seq`` is not a point, or the journal does not fold up to it.
        """
        self.point(seq)
        marks = [anchor.watermark for anchor in self.anchors]
        anchor = self.anchors[bisect_right(marks, seq) - 1]
        base = self.decoded.get(anchor.key) or adopt_journal_fields(
            decode(self.values[anchor.key], key=anchor.key)
        )
        if anchor.watermark == seq:
            return base, ()
        start = tail_read_from(base)
        events: Sequence[JournalEvent] = self.events
        if not events or events[0].seq < start or events[-1].seq > seq:
            events = [event for event in events if start <= event.seq <= seq]
        result = fold_tail(base, events, started_calls=started)
        if isinstance(result, Discarded):
            raise CheckpointError(
                f"the journal of run {self.run_id!r} does not fold up to seq {seq}: {result.reason}"
            )
        return replace(result.snapshot, journal_watermark_seq=seq), result.started_calls


async def run_history(
    store: MemoryStore, run_id: str, *, journal: RunJournal | None = None
) -> list[HistoryPoint]:
    """Every restorable point of a journal-first run, oldest first (decision D17).

    Reads the anchors' summaries and the run's journal; no snapshot is decoded.

    Args:
        store: the run's checkpoint store (its anchors live there).
        run_id: the run.
        journal: the run's journal; ``None``: the one its snapshots name (``journalRef``).

    Raises:
        NoHistoryError: the run has no anchors (unknown, or not run journal-first).
        CheckpointError: its journal cannot be opened.
    """
    return list((await load_timeline(store, run_id, journal=journal)).points)


async def state_at(
    store: MemoryStore, run_id: str, seq: int, *, journal: RunJournal | None = None
) -> CheckpointSnapshot:
    """The run's state at the history point ``seq``: the snapshot it would have saved there.

    The anchor at or below ``seq`` folded with the run's journal events up to ``seq``; its
    ``journal_watermark_seq`` is ``seq``. Nothing is written.

    Raises:
        CheckpointError: ``seq`` is not a history point (the nearest are named), an anchor does
            not decode, or as ``run_history``.
    """
    timeline = await load_timeline(store, run_id, journal=journal, at=seq)
    return timeline.fold_at(seq, started=False)[0]


async def load_timeline(
    store: MemoryStore,
    run_id: str,
    *,
    journal: RunJournal | None = None,
    at: int | None = None,
    use_latest: bool = True,
) -> RunTimeline:
    """Read a run's anchors and journal events and list its points (see the module docstring).

    Args:
        at: only what a fold to the point ``at`` needs: the newest stored state below it (an
            anchor, or the run's latest snapshot: ``_with_latest``), the events from there up
            to ``at``, and of the points the anchors' and ``at``. A seq that is no point there
            gets the whole history read, so that the error names the nearest points of all.
        use_latest: with ``at``, the run's latest snapshot may be the state folded from.

    Raises:
        CheckpointError: as ``run_history``.
    """
    anchors, values, latest = await _anchors(store, run_id)
    decoded: dict[str, CheckpointSnapshot] = {}
    if at is not None and latest is not None and use_latest:
        anchors = _with_latest(anchors, latest, run_id, at, values, decoded)
    first, last = 0, len(anchors)
    if at is not None:
        # The segment holding ``at``: its anchor and the next one (which ends the segment).
        first = max(bisect_right([a.watermark for a in anchors], at) - 1, 0)
        last = min(first + 2, len(anchors))
    segment = anchors[first:last]
    end = segment[-1].watermark if last < len(anchors) else None
    # A fold to ``at`` needs no event above it (nor do the points up to it): not parsed.
    through = end if at is None else at if end is None else min(end, at)
    opened = journal is None
    source = open_journal_ref(anchors[-1].journal_ref, store) if journal is None else journal
    # The cyclic collector is held off while the events parse and their points are made, as
    # a restore's tail read does (``read_journal_tail``): thousands of new containers, none
    # garbage; its passes were about half of the read's CPU on a 1000-turn run.
    with gc_paused():
        try:
            # A fold reads only the types it folds; a listing only those that make points.
            types = POINT_TYPES if at is None else _FOLD_READS
            # From the first anchor's watermark at the latest: its event names the anchor's
            # task (``_anchor_task``).
            start = min(segment[0].watermark, *(a.read_from for a in segment))
            events = await read_run_range(source, run_id, start, through, types=types)
            mine = tuple(event for event in events if event.run_id == run_id)
            if at is None:
                await _refuse_lost(source, run_id, anchors, mine)
        finally:
            if opened:
                await source.close()
        timeline = RunTimeline(
            run_id=run_id,
            anchors=anchors,
            values=values,
            events=mine,
            points=tuple(_points(segment, mine, only=at)),
            decoded=decoded,
        )
    if at is not None and at not in {p.seq for p in timeline.points}:
        return await load_timeline(store, run_id, journal=journal)
    if at is not None and decoded and _older_attempt(timeline, at):
        return await load_timeline(store, run_id, journal=journal, at=at, use_latest=False)
    return timeline


async def _refuse_lost(
    source: RunJournal,
    run_id: str,
    anchors: Sequence[AnchorSummary],
    events: Sequence[JournalEvent],
) -> None:
    """Refuse a journal without the run's events its newest anchor says it held.

    An anchor's ref names the highest seq of the run its journal held then (``through``); a
    journal with no event of the run from there on is another one, or lost them (a restore
    refuses it alike: ``lost_events``). Listed without it, the history would be the anchors'
    points alone, and a fork at any other point refused as no point.
    """
    through = max((_through(anchor.journal_ref) for anchor in anchors), default=0)
    if through == 0 or any(event.seq >= through for event in events):
        return
    if await read_run_range(source, run_id, through):  # the listing reads only some types
        return
    raise CheckpointError(
        f"the journal holds no event of run {run_id!r} at or above seq {through}, which it held "
        "when the run's snapshots were saved: another journal, or one that lost events"
    )


def _through(ref: Mapping[str, Any] | None) -> int:
    through = None if ref is None else ref.get(THROUGH_MEMBER)
    return through if isinstance(through, int) and not isinstance(through, bool) else 0


def _older_attempt(timeline: RunTimeline, at: int) -> bool:
    """The point ``at`` was reached by an attempt older than the latest snapshot it would be
    folded from (a writer of a superseded attempt, whose events that snapshot never held):
    the fold starts at the anchor below instead."""
    marks = [anchor.watermark for anchor in timeline.anchors]
    base = timeline.anchors[bisect_right(marks, at) - 1]
    snapshot = timeline.decoded.get(base.key)
    return snapshot is not None and timeline.point(at).attempt < snapshot.attempt


async def _anchors(
    store: MemoryStore, run_id: str
) -> tuple[tuple[AnchorSummary, ...], dict[str, str], tuple[str, str] | None]:
    """The run's anchors by watermark, their texts, and its latest snapshot's key and text."""
    # The run's own keys alone: a database store holds every run's anchors.
    found: list[AnchorSummary] = []
    values: dict[str, str] = {}
    latest: tuple[str, str] | None = None
    newest: AnchorSummary | None = None
    entry = await store.get(checkpoint_key(run_id))
    if entry is not None:
        latest = (entry.key, entry.value)
        if (entry.metadata or {}).get(SUMMARY) is not None:
            # The newest anchor, not yet copied: the latest snapshot is it (``anchors``).
            newest = _summary(entry.key, entry.value, entry.metadata, run_id)
            newest = replace(newest, key=history_key(run_id, newest.watermark))
    for entry in await history_entries(store, run_id):
        values[entry.key] = entry.value
        found.append(_summary(entry.key, entry.value, entry.metadata, run_id))
    if newest is not None and latest is not None and newest.key not in values:
        values[newest.key] = latest[1]
        found.append(newest)
    if not found:
        raise NoHistoryError(run_id, saved=latest is not None)
    found.sort(key=lambda anchor: anchor.watermark)
    return tuple(found), values, latest


def _with_latest(
    anchors: tuple[AnchorSummary, ...],
    latest: tuple[str, str],
    run_id: str,
    at: int,
    values: dict[str, str],
    decoded: dict[str, CheckpointSnapshot],
) -> tuple[AnchorSummary, ...]:
    """``anchors`` with the run's latest snapshot among them when a fold to ``at`` is shorter
    from it: its watermark is above the nearest anchor at or below ``at``, and below ``at``,
    and its attempt is not older than that anchor's (the same line of attempts; the point's
    own attempt is checked once the events are read: ``_older_attempt``).

    The latest snapshot is a compaction the journal folds to exactly (a compaction of any other
    kind keeps an anchor at its watermark, D17), so folding from it and from the anchor below
    it give the same state; it is what an interrupted run's restore folds from too. Its
    watermark is first read from the text (``_watermark_hint``) so that a snapshot of no use is
    not decoded; the decoded snapshot is what is checked.
    """
    key, text = latest
    below = [anchor for anchor in anchors if anchor.watermark <= at]
    floor = below[-1].watermark if below else -1
    hint = _watermark_hint(text)
    if hint is None or not floor < hint < at:
        return anchors
    try:
        snapshot = adopt_journal_fields(decode(text, key=key))
    except CheckpointError:
        return anchors  # the anchors alone still answer
    watermark = snapshot.journal_watermark_seq
    if snapshot.run_id != run_id or watermark is None or not floor < watermark < at:
        return anchors
    if below and snapshot.attempt < below[-1].attempt:
        return anchors  # written by a superseded attempt after a newer one's anchor
    values[key] = text
    decoded[key] = snapshot
    summary = replace(summarize(snapshot, "snapshot"), key=key)
    return tuple(sorted((*anchors, summary), key=lambda anchor: anchor.watermark))


_WATERMARK = '"journalWatermarkSeq":'


def _watermark_hint(text: str) -> int | None:
    """The watermark a snapshot's text shows, without decoding it (``None``: none shown).

    The root member comes after the in-flight state (whose tool inputs may hold any key), so
    the last occurrence is read; only a hint: the decoded snapshot is checked.
    """
    at = text.rfind(_WATERMARK)
    if at < 0:
        return None
    digits = text[at + len(_WATERMARK) : at + len(_WATERMARK) + 20]
    end = len(digits) - len(digits.lstrip("0123456789"))
    return int(digits[:end]) if end else None


def _summary(
    key: str, value: str, metadata: Mapping[str, Any] | None, run_id: str
) -> AnchorSummary:
    raw = (metadata or {}).get(SUMMARY)
    if isinstance(raw, dict):
        try:
            return AnchorSummary.from_json(key, raw)
        except (KeyError, TypeError, ValueError):
            pass  # a store that mangled the metadata: the snapshot itself says the same
    snapshot = adopt_journal_fields(decode(value, key=key))
    if snapshot.run_id != run_id:
        raise CheckpointError(f"history anchor {key!r} holds run {snapshot.run_id!r}")
    boundary = str((metadata or {}).get("boundary") or "snapshot")
    return replace(summarize(snapshot, boundary), key=key)


def _points(
    anchors: tuple[AnchorSummary, ...], events: tuple[JournalEvent, ...], only: int | None = None
) -> list[HistoryPoint]:
    """The points of ``anchors`` and ``events``; with ``only``, the anchors' and the point at
    ``only`` alone (a fold to one point checks that it is one: the others' labels and times
    were most of its cost, profiled on a 1000-turn run)."""
    points: list[HistoryPoint] = []
    seqs = [event.seq for event in events]
    for index, anchor in enumerate(anchors):
        # The events of the segment: above the anchor, below the next one (found by bisection,
        # the events being in seq order: a listing of 1000 turns walks each event once).
        first = bisect_right(seqs, anchor.watermark)
        points.append(_anchor_point(anchor, _anchor_task(anchor, events, first)))
        last = bisect_left(seqs, anchors[index + 1].watermark) if index + 1 < len(anchors) else None
        turns = {(e.task_id, e.agent): e.turns for e in anchor.in_flight}
        # Tool names by conversation and call id: a call id is unique within one conversation
        # only (two tasks' models may both name a call ``call_0``).
        names = {
            ((e.task_id, e.agent), call): name
            for e in anchor.in_flight
            for call, name in e.calls.items()
        }
        assigned: set[tuple[str, str]] = set()
        segment = events[first:last]
        if only is not None:
            # Of the other events, only those its label needs: the turns and the tool names
            # (answers) and the conversations opened (task starts); the loop below does the
            # same with them alone.
            segment = tuple(e for e in segment if e.seq == only or e.type in _LABEL_READS)
        for event in segment:
            key = (event.task_id or "", event.agent_name or "")
            if event.type == TASK_STATUS:
                if event.data.get("status") == "in_progress":
                    assigned.add(key)  # the task's start names its assignee
                continue
            if key in assigned and key not in turns:
                # A conversation the anchor does not hold, opened since by its task's start
                # (the fold opens its entry the same way); a delegated child's is not its
                # task's assignee's. (A task started before the anchor whose conversation the
                # anchor lacks shows its points from the next anchor on.)
                turns[key] = 0
            if key not in turns:
                continue
            if only is not None and event.seq != only:
                # Not the point asked for: only what its label needs (turns, tool names).
                if event.type == ASSISTANT_MESSAGE:
                    _count_turn(event, key, turns, names)
                continue
            what = _event_boundary(event, key, turns, names)
            if what is not None:
                points.append(_event_point(event, turns[key], *what))
    return points


_TASK_BOUNDARIES = frozenset(get_args(BoundaryKind)) | {"task_completed"}
"""The boundaries that record one task's state (a runner's, a task's completion)."""


def _anchor_task(anchor: AnchorSummary, events: Sequence[JournalEvent], first: int) -> str | None:
    """The task whose boundary ``anchor`` saved, when its journal events say it.

    A task's boundary is saved right after the task's own event (its answer, commit or turn
    end), so the event at the anchor's watermark, of a point's type, names it (``load_timeline``
    reads that event in a listing and in a fold to the anchor alike). That task need not be in
    flight in the snapshot: an ``attempt_reset`` drops its entry and a ``task_completed`` ends
    it, so the anchor's in-flight entries cannot say it.
    """
    if anchor.boundary not in _TASK_BOUNDARIES or not first:
        return None
    event = events[first - 1]
    if event.seq != anchor.watermark or event.type not in POINT_TYPES:
        return None
    return event.task_id


def _anchor_point(anchor: AnchorSummary, task_id: str | None = None) -> HistoryPoint:
    """The point of ``anchor``: of ``task_id`` when the boundary is that task's, else of the one
    task it holds in flight (if one)."""
    running = ", ".join(f"{e.task_id} turn {e.turns}" for e in anchor.in_flight)
    if task_id is None and len(anchor.in_flight) == 1:
        task_id = anchor.in_flight[0].task_id
    return HistoryPoint(
        seq=anchor.watermark,
        attempt=anchor.attempt,
        boundary=anchor.boundary,
        task_id=task_id,
        at=from_iso(anchor.created_at),
        label=(
            f"{anchor.boundary} (snapshot): {running or 'no task running'}; "
            f"{anchor.completed}/{anchor.tasks} tasks completed, {anchor.status}"
        ),
    )


def _event_boundary(
    event: JournalEvent,
    key: tuple[str, str],
    turns: dict[tuple[str, str], int],
    names: dict[tuple[tuple[str, str], str], str],
) -> tuple[str, str] | None:
    """The boundary ``event`` (of the conversation ``key``) closes and what it did, or
    ``None``: it closes none.

    Counts the conversation's turns (``turns``) and learns its calls' tool names (``names``).
    """
    data = event.data
    kind = event.type
    if kind == ASSISTANT_MESSAGE:
        calls = _count_turn(event, key, turns, names)
        if calls:
            return "assistant_tool_turn", "asks for " + ", ".join(
                str(block.get("name")) for block in calls
            )
    elif kind == TOOL_CALL:
        call = data.get("call") or {}
        return "tool_dispatch", f"tool {call.get('name')} dispatched"
    elif kind == TOOL_RESULT:
        name = names.get((key, str(data.get("toolCallId"))), "?")
        return "tool_commit", f"tool {name} committed"
    elif kind == TURN_END:
        outcome = data.get("outcome")
        if outcome == "tool_use":
            return "tool_results", "results sent to the model"
        if outcome == "completed":
            return "terminal", "final answer"
    return None


def _count_turn(
    event: JournalEvent,
    key: tuple[str, str],
    turns: dict[tuple[str, str], int],
    names: dict[tuple[tuple[str, str], str], str],
) -> list[dict[str, Any]]:
    """Count the turn an ``assistant/message`` opens and learn its calls' tool names; its
    calls."""
    turns[key] += 1
    content = (event.data.get("message") or {}).get("content") or []
    calls = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    for block in calls:
        names[(key, str(block.get("id")))] = str(block.get("name"))
    return calls


_POINT_FIELDS = ("seq", "attempt", "boundary", "task_id", "at", "label")
_set_seq, _set_attempt, _set_boundary, _set_task, _set_at, _set_label = slot_setters(
    HistoryPoint, _POINT_FIELDS
)


def _event_point(event: JournalEvent, turn: int, boundary: str, what: str) -> HistoryPoint:
    """The point ``event`` closes. Its slots are set directly, as ``codec`` builds an event:
    ``HistoryPoint(...)`` (one ``object.__setattr__`` a field) was 1.6 us of the 4000 points
    of a 1000-turn listing, this 0.6 us; the same point (``tests/history``)."""
    point: HistoryPoint = object.__new__(HistoryPoint)
    _set_seq(point, event.seq)
    _set_attempt(point, event.attempt)
    _set_boundary(point, boundary)
    _set_task(point, event.task_id)
    _set_at(point, datetime.fromtimestamp(event.timestamp_unix_ms / 1000, UTC))
    _set_label(point, f"{event.task_id} turn {turn}: {what}")
    return point

"""Journal-first saves (decision D10): when a journal append is the save, and when to compact.

With a durable journal, a run's per-turn boundaries (``JOURNAL_BOUNDARIES``) are saved by making
their journal events durable; the v5 snapshot is written only at compaction points. The fold
(``checkpoint.fold``) carries every fact such a boundary changes (D14): the conversations, a
task's start, a completion's announcement, a final answer (``turn/end`` completed: the
``terminal`` boundary of a run that answered; any other end compacts). So the state a
restore rebuilds from the last snapshot and the journal is the run's own by construction, and
no equality check of the two runs on the save path: the property test over random runs
(``tests/journal_facts/test_facts_fold_property.py``) asserts it at every durable boundary.
Whether a boundary can be journal-only is decided from what was recorded since the last save,
never by comparing states (D14): an event the fold does not carry (``_uncarried_event``: a
shared-memory write, a task change other than its start or its announcement, an approval
decision, a plan, a turn ended other than by a final answer or its results), or a fact no event
says, which the run marks on its recorder where it happens (``JournalRecorder.uncarried``: an
approval used up by a commit or a dispatch, an exceeded budget, a stop at ``max_turns``, a task
assigned but not started, what a restore rewrote). A new conversation is journal-only too: the
fold opens its entry from the task's start and its prompt, and a restore whose tail is discarded
or damaged fails closed a task whose dispatched unsafe call it cannot resume
(``checkpoint.stranded``).

A boundary that compacts holds its events back from the journal until its snapshot is durable
(``compacted`` releases them): what a crash can leave in the journal is then always a tail the
fold takes.

Compaction points: every boundary outside ``JOURNAL_BOUNDARIES`` (task completion, suspension,
synthesis, run end ...), the first boundary of the writer (there is no view yet: a fresh run's
admission; a restored attempt's view is seeded from its restore, ``seed``, so its admission is
the append of its ``run/start``, which carries the attempt and its trace ids),
any boundary after a failed save or a failed append (what is on disk is no longer known), a
fact the fold does not carry, and a boundary whose tail since the last snapshot outgrew
``TAIL_RATIO`` times that snapshot and ``MIN_TAIL_BYTES`` (so a restore folds at most twice the
bytes it reads in the snapshot, or 64 KiB, and the snapshots written form a geometric series:
O(what changed) amortized).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import orjson

from oma_actors.journal.ref import DURABLE_MEMBER, durable_ref

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from oma_actors.domain.snapshot import CheckpointSnapshot, RunIdentity
    from oma_actors.journal.event import JournalEvent
    from oma_actors.journal.fold import StartedCall
    from oma_actors.journal.sql import AppendFence

JOURNAL_BOUNDARIES: frozenset[str] = frozenset(
    {
        "admission",
        "assistant_tool_turn",
        "tool_dispatch",
        "tool_commit",
        "tool_results",
        "terminal",
    }
)
"""The boundaries a durable journal can save without a snapshot (D10): the per-turn ones, the
final answer (``terminal``), and a restored attempt's admission (its ``run/start`` carries the
attempt, D14). A fresh run's admission has no view yet, so it always compacts."""

MIN_TAIL_BYTES = 64 * 1024
"""A tail may always grow this far before it compacts: rewriting a small snapshot for every
few events would cost more than folding them (64 KiB folds in a few milliseconds)."""


TAIL_RATIO = 2
"""A tail may grow to this many times its snapshot's bytes before it compacts.

A journal-first snapshot holds each tool output once (``checkpoint.once``) where OMA's form
holds it three times, so it is about half as large as it was when the bound was 1: twice the
smaller snapshot keeps a restore's bytes (snapshot + tail) no larger than the old bound let
them be, and the series of snapshots a long run rewrites half as frequent (P3; measured with
``bench/restore_stages.py`` and ``bench/checkpoint.py --only P3``, issue 19 item 5)."""


class JournalTail(Protocol):
    """What the writer needs of a run's durable journal (``JournalRecorder`` is one)."""

    def take_through(self, seq: int) -> list[JournalEvent]:
        """The events emitted up to ``seq`` that were not taken before, in order."""
        ...

    async def durable_through(self, seq: int) -> None:
        """Return once every event up to ``seq`` is durable; raise if one could not be."""
        ...

    def cover(self, seq: int) -> None:
        """A snapshot holding the run through ``seq`` is durable."""
        ...

    def release(self, seq: int) -> None:
        """Let the events up to ``seq`` go to the journal (they were held until now)."""
        ...

    @property
    def appended_seq(self) -> int:
        """The highest seq of the run known to be in the journal (0: none yet)."""
        ...

    def fence_appends(self, fence: AppendFence) -> bool:
        """Append every later batch under a run lease's fence, if the journal can (D15)."""
        ...

    def take_uncarried(self) -> str | None:
        """Why the next save compacts: a fact recorded that no event carries, or ``None``."""
        ...


def mark_started_unsafe(
    snapshot: CheckpointSnapshot,
    started: Collection[StartedCall],
    unsafe: Mapping[str, Collection[str]],
) -> CheckpointSnapshot:
    """``snapshot`` with every started call of an ``unsafe`` tool marked dispatched.

    Decision D1 on restore: the journal shows the call started, so its effect may have happened;
    an uncommitted one must never run again (the model gets ``TOOL_OUTCOME_UNKNOWN`` unless
    reconciled). A committed one is marked too, as the runner's own state has it: then folding
    the tail at once and folding it boundary by boundary give the same state.
    """
    keys = {(call.task_id, call.agent_name, call.call_id) for call in started}
    if not keys:
        return snapshot
    entries = []
    for entry in snapshot.in_flight:
        tools = unsafe.get(entry.assignee, ())
        pending = tuple(
            replace(item, dispatched=True)
            if not item.dispatched
            and item.call.name in tools
            and (entry.task_id, entry.assignee, item.call.id) in keys
            else item
            for item in entry.state.pending
        )
        if pending != entry.state.pending:
            entry = replace(entry, state=replace(entry.state, pending=pending))
        entries.append(entry)
    return replace(snapshot, in_flight=tuple(entries))


@dataclass(slots=True)
class JournalPath:
    """The journal side of one run's writer: when a boundary is journal-only, and compaction.

    Args:
        tail: the run's recorder.
        unsafe: per agent, the names of its ``unsafe`` tools (for the dispatched marks).
        enforce_lineage: the fold's lineage rule, as the restore will run it.
    """

    tail: JournalTail
    unsafe: Mapping[str, Collection[str]]
    enforce_lineage: bool = False
    _based: bool = False
    """Whether the journal extends a state known durable (a compaction, a restore, a commit):
    until then, and after any failed save, a journal boundary compacts."""
    _snapshot_bytes: int = 0
    _tail_bytes: int = 0
    _compacted_through: int = 0
    divergence: str | None = None
    """Why the last boundary that could have been journal-only compacted (for diagnostics)."""
    outgrown: bool = False
    """The last boundary compacted only because the tail outgrew the snapshot: the journal
    alone folds to it exactly, so it needs no history anchor (D17)."""

    def fold(self, snapshot: CheckpointSnapshot, boundary: str) -> CheckpointSnapshot | None:
        """``snapshot`` when its boundary is journal-only (``journal_only``), else ``None``."""
        if self.journal_only(snapshot.journal_watermark_seq or 0, boundary):
            return snapshot
        return None

    def journal_only(self, watermark: int, boundary: str) -> bool:
        """Whether the boundary recorded through ``watermark`` is saved by its events alone.

        The fold carries every fact a journal boundary changes (D14: conversations, task
        starts, announcements, final answers), so the restore view is the run's own state by
        construction; the property test (``tests/journal_facts``) asserts that a restore folds
        to it at every durable boundary. Nothing is compared here, and no snapshot is needed
        (issue 19): the boundary compacts (``False``) when a fact recorded since the last save
        is one the fold does not carry (its events, the recorder's marks). Every call takes
        the boundary's events and marks from the tail, so nothing piles up, whichever way the
        boundary is saved.
        """
        events = self.tail.take_through(watermark)
        marked = self.tail.take_uncarried()
        self.divergence = None
        self.outgrown = False
        if boundary not in JOURNAL_BOUNDARIES or not self._based:
            return False
        self._tail_bytes += _size(events)
        self.divergence = marked or _uncarried_event(events)
        if self.divergence is not None:
            return False
        if self._tail_bytes > max(TAIL_RATIO * self._snapshot_bytes, MIN_TAIL_BYTES):
            self.outgrown = True
            self.divergence = (
                f"the tail since the last snapshot ({self._tail_bytes} bytes) outgrew it "
                f"({self._snapshot_bytes} bytes)"
            )
            return False
        return True

    def seed(self, restored: CheckpointSnapshot, identity: RunIdentity) -> None:
        """Start from a restore: ``restored`` (snapshot and tail) with the attempt's ``run/start``.

        ``restored`` must be what a restore folds from the store and this journal right now (a
        journal-first snapshot whose tail folded cleanly), and ``identity`` what this attempt's
        ``run/start`` carries: the fold makes it the run's attempt and identity. The journal
        then extends a durable state, so the restored attempt's admission is the append of its
        ``run/start``, not a rewrite of the whole state (issue 19). Neither is kept: the
        journal, not a copy of the state, is what the next boundaries extend (D14).
        The size of the stored snapshot is not known here (0): the tail compacts once it grows
        past ``MIN_TAIL_BYTES``, one whole write where the restore used to make one at once.
        """
        del restored, identity  # the contract of the call; nothing of them is needed here
        self._based = True
        self._snapshot_bytes = 0
        self._tail_bytes = 0
        self._compacted_through = 0

    async def commit(self, watermark: int) -> None:
        """Wait until the boundary's events (through ``watermark``) are durable.

        Raises:
            Exception: the journal could not make them durable; the next boundary compacts.
        """
        self._based = False
        await self.tail.durable_through(watermark)
        self._based = True

    async def vouch(self, snapshot: CheckpointSnapshot) -> CheckpointSnapshot:
        """``snapshot`` about to compact, its ref naming how far the journal holds the run (D15).

        The previous compaction's events were released when it became durable; waiting for
        them here (normally long since on disk) lets this snapshot name a seq the journal
        holds (``through``), so a restore can tell a journal that lost events since (emptied,
        truncated below it, replaced) from one that never had them. Best effort: a failed
        append leaves the claim where it was.
        """
        ref = snapshot.journal_ref
        if ref is None or ref.get(DURABLE_MEMBER) is not True:
            return snapshot
        if self._compacted_through:
            # A failed append (a hole a snapshot covers) only means less is claimed.
            with contextlib.suppress(Exception):
                await self.tail.durable_through(self._compacted_through)
        return replace(snapshot, journal_ref=durable_ref(ref, through=self.tail.appended_seq))

    def compacted(self, snapshot: CheckpointSnapshot, size: int) -> None:
        """The snapshot (``size`` bytes) is durable: the journal extends it from now on."""
        self._based = True
        self._snapshot_bytes = size
        self._tail_bytes = 0
        watermark = snapshot.journal_watermark_seq or 0
        self._compacted_through = watermark
        self.tail.cover(watermark)
        # Only now may this boundary's events reach the journal: had they gone first, a crash
        # during the snapshot write could leave a tail the fold refuses (a final answer), and
        # a refused tail is discarded whole, journal-only saves included.
        self.tail.release(watermark)

    def lost(self) -> None:
        """A save failed: what is on disk is unknown, so the next boundary compacts."""
        self._based = False


# How each kind of event changes what a snapshot holds, for the compaction decision (D14).
_CARRIED_STATUSES = frozenset({"in_progress", "completed"})
_UNCARRIED_ENDS = frozenset({"budget_exceeded", "loop_detected"})


def _uncarried_event(events: Sequence[JournalEvent]) -> str | None:
    """Why one of ``events`` (what was recorded since the last save) needs a snapshot, or ``None``.

    The decision comes from the facts recorded, never from comparing states: a shared-memory
    write, a task change other than its start or its completion's announcement, an approval
    decision, a new plan, or a turn that ended other than by a final answer or its results.
    The facts no event says are marked on the recorder (``JournalRecorder.uncarried``).
    """
    for event in events:
        kind, data = event.type, event.data
        if kind == "memory/set":
            return f"the shared memory changed at seq {event.seq}, which the fold does not carry"
        if kind == "task/status" and (
            data.get("status") not in _CARRIED_STATUSES
            or (data.get("status") == "in_progress" and data.get("updatedAt") is None)
        ):
            return f"task {event.task_id!r} changed other than by its start"
        if kind in ("approval/decision", "plan/set"):
            return f"{kind} at seq {event.seq}, which the fold does not carry"
        if kind == "turn/end" and data.get("outcome") in _UNCARRIED_ENDS:
            return "a completion other than a final answer"
    return None


def _size(events: Sequence[JournalEvent]) -> int:
    """About how many bytes the events take in the journal (their variant fields' JSON).

    ``orjson``: a tenth of ``json.dumps``'s cost, on every journal-only boundary. Its bytes are
    the UTF-8 ones a journal line holds (``json.dumps`` counted ASCII escapes and spaces).
    """
    return sum(_data_size(event.data) + 120 for event in events)


def _data_size(data: object) -> int:
    try:
        return len(orjson.dumps(data, default=str))
    except TypeError:  # past 64-bit integers, lone surrogates: an estimate all the same
        return len(json.dumps(data, default=str))

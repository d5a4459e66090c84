"""Reading a snapshot's journal tail: the run's own events a fold needs (spec 17.3, D10).

A journal file may hold several runs (runs of one process share its batches, D10), so the tail
of a snapshot is the events of its run from ``tail_read_from(snapshot)`` on. Every reader of a
tail (restore, ``oma checkpoint show``) goes through here, so none forgets the run filter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.gc_pause import gc_paused
from oma_actors.journal.base import read_run
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.journal.fold import Discarded, tail_read_from
from oma_actors.journal.ref import depends_on_journal, journal_through

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.journal.base import RunJournal
    from oma_actors.journal.event import JournalEvent


async def read_journal_tail(
    journal: RunJournal, snapshot: CheckpointSnapshot
) -> list[JournalEvent]:
    """The events of ``snapshot``'s run that a fold of ``snapshot`` reads, in journal order.

    The cyclic collector is held off while the tail parses (``gc_paused``, P5): a long tail
    is thousands of new event dicts, none of them garbage, and with a decoded snapshot already
    in memory each older-generation pass walks all of it again (about 40% of the read's CPU on
    a 1000-turn run). The pause is process-wide, so it covers the journal's reader thread too.

    Raises:
        Exception: the journal's own read error (e.g. ``JournalCorruptError``).
    """
    with gc_paused():
        if not snapshot.run_id:
            return await journal.read_from(tail_read_from(snapshot))
        # An indexed query on a database journal; a filtered read of a file.
        return await read_run(journal, snapshot.run_id, tail_read_from(snapshot))


async def lost_events(
    journal: RunJournal, snapshot: CheckpointSnapshot, tail: Sequence[JournalEvent]
) -> Discarded | None:
    """Why the journal lost events a journal-first ``snapshot`` knew it held, or ``None``.

    The snapshot's ref names the highest seq of its run the journal held when it was built
    (``through``); a journal with no event of the run from there on was emptied, truncated or
    replaced since. (Events appended after the snapshot and then cut off leave no such trace:
    only the journal knew of them.)
    """
    gap = _gap(snapshot, tail)
    if gap is not None:
        return gap
    through = journal_through(snapshot)
    if through == 0 or any(event.seq >= through for event in tail):
        return None
    if not tail:  # the tail may start above ``through``: look from there
        found = await journal.read_from(through)
        if any(event.run_id == snapshot.run_id for event in found):
            return None
    return Discarded(
        snapshot=snapshot,
        seq=through,
        reason=(
            f"the journal holds no event of run {snapshot.run_id!r} at or above seq {through}, "
            "which it held when the snapshot was saved: events were lost"
        ),
    )


def _gap(snapshot: CheckpointSnapshot, tail: Sequence[JournalEvent]) -> Discarded | None:
    """A seq missing from a journal-first snapshot's tail above its watermark, or ``None``.

    Above the watermark a run's seqs are consecutive in its journal: its recorder stamps them
    one by one, an attempt continues above the highest seq it read, and what a compaction holds
    back goes out only with it (a crash then leaves none of them and none after). A hole there is
    events lost after they were appended: an in-memory journal that evicted them, a journal file
    edited or cut in the middle. Folding across it would skip the conversation a lost prompt
    opened, and run its recorded calls again. At or below the watermark a hole is legitimate:
    the snapshot holds those seqs, and the events a compaction held back die with a crash right
    after its snapshot became durable (JR-22: forward gaps).
    """
    if not depends_on_journal(snapshot):
        return None  # OMA's mode: the snapshot is the save, the tail only adds to it (JR-20)
    watermark = adopt_journal_fields(snapshot).journal_watermark_seq or 0
    expected = watermark + 1
    for event in tail:
        if event.seq <= watermark:
            continue
        # (A seq that does not increase is the fold's to refuse: it says why.)
        if event.seq > expected:
            return Discarded(
                snapshot=snapshot,
                seq=expected,
                reason=(
                    f"the journal holds no event of run {snapshot.run_id!r} at seq {expected} "
                    f"but holds seq {event.seq}: events were lost"
                ),
            )
        expected = max(expected, event.seq + 1)
    return None

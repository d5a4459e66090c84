"""``oma checkpoint show``'s journal side: fold the run's journal tail into the snapshot shown.

With journal-first durability (D10) the snapshot in the store is a compaction point and the
journal holds what happened since; a restore folds the two, so a view of "where the run stands"
must fold them too. The journal is the one the snapshot names (``journalRef``: a JSONL file, or
the journal in the database of ``--store``, D15) unless ``--journal`` names another;
``--no-journal`` shows the snapshot alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiofiles.os

from oma_actors import ConfigurationError, open_journal
from oma_actors.checkpoint import Discarded, fold_tail, mark_started_unsafe, read_journal_tail
from oma_actors.cli.encryption import keyring_from_env, sealed_journal
from oma_actors.journal import JsonlRunJournal
from oma_actors.journal.tail import lost_events

if TYPE_CHECKING:
    import argparse

    from oma_actors.checkpoint import CheckpointSnapshot
    from oma_actors.journal import RunJournal


@dataclass(frozen=True, slots=True)
class TailView:
    """The snapshot to show and one line saying what the journal added.

    Attributes:
        snapshot: the stored snapshot with the tail folded in (or as stored).
        note: how many events were folded from which file, why the tail was discarded, or
            why no journal was read; ``None`` for a snapshot written without a journal.
        ok: ``False`` when the journal named could not be used (missing, unreadable).
    """

    snapshot: CheckpointSnapshot
    note: str | None
    ok: bool = True


def add_journal_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--journal PATH`` and ``--no-journal`` to ``parser``."""
    parser.add_argument(
        "--journal",
        metavar="PATH",
        help="the run's JSONL journal (default: the one the snapshot names, when it exists)",
    )
    parser.add_argument(
        "--no-journal", action="store_true", help="show the stored snapshot without its tail"
    )


def named_file(snapshot: CheckpointSnapshot) -> str | None:
    """The JSONL journal file the snapshot names (``journalRef.path``), if any."""
    ref = snapshot.raw.get("journalRef")
    path = ref.get("path") if isinstance(ref, dict) else None
    return path if isinstance(path, str) and path else None


def database_journal(snapshot: CheckpointSnapshot, store_uri: str | None) -> RunJournal | None:
    """The journal in the database of ``store_uri`` when the snapshot names that one (the
    caller closes it); ``None`` when it names a file, or a journal of another database."""
    ref = snapshot.raw.get("journalRef")
    if store_uri is None or not isinstance(ref, dict) or ref.get("store") != "same-database":
        return None
    try:
        journal = open_journal(store_uri)  # opens nothing yet: connects on the first read
    except ConfigurationError:
        return None  # a store that keeps no journal (Redis): not the database the ref names
    described = journal.describe()
    if any(described.get(key) != ref.get(key) for key in ("kind", "store", "table")):
        return None
    return sealed_journal(journal, keyring_from_env())


def named_journal(snapshot: CheckpointSnapshot, store_uri: str | None) -> RunJournal | None:
    """The journal the snapshot names, to read (the caller closes it), sealed with
    ``OMA_ENCRYPTION_KEYS`` when set: its JSONL file (a missing one reads empty), or its
    store's database journal; ``None`` when it names neither."""
    path = named_file(snapshot)
    if path is not None:
        return sealed_journal(JsonlRunJournal(path, flush_interval_ms=0), keyring_from_env())
    return database_journal(snapshot, store_uri)


async def with_tail(
    snapshot: CheckpointSnapshot,
    *,
    journal: str | None = None,
    skip: bool = False,
    store_uri: str | None = None,
) -> TailView:
    """``snapshot`` with its journal tail folded in, as a restore would see it.

    Every call the tail shows as started and the folded state has not committed is shown
    ``dispatched``: after a journal-first crash its dispatch record is in the tail only, and a
    restore never runs it again (D1), so "not committed" (about to run) would be wrong.

    Args:
        snapshot: the stored snapshot.
        journal: the JSONL journal to read (default: the one the snapshot names).
        skip: show the snapshot alone.
        store_uri: the store the snapshot was read from: a journal in its database is read
            when the snapshot names that one.

    Raises:
        CorruptStoreError: the journal is not a regular file or is over the read limit.
        JournalCorruptError: a line other than a torn trailing one is unreadable.
    """
    ref = snapshot.raw.get("journalRef")
    if skip or snapshot.raw.get("journalWatermarkSeq") is None:
        return TailView(snapshot, None)
    durable = isinstance(ref, dict) and ref.get("durable") is True
    path = journal
    reader: RunJournal | None = None
    if path is None:
        path = ref.get("path") if isinstance(ref, dict) else None
        if not isinstance(path, str):
            kind = ref.get("kind") if isinstance(ref, dict) else None
            reader = database_journal(snapshot, store_uri)
            if reader is None:
                return TailView(
                    snapshot,
                    f"journal: {kind or 'unknown'} journal, not in this store's database: no tail",
                    ok=not durable,
                )
            path = f"the {kind} of this store's database"
    # exists, not isfile: a FIFO or a device named as the journal is refused by the reader
    # (one typed error, exit 2) rather than shown as a missing file.
    if reader is None and not await aiofiles.os.path.exists(path):
        return TailView(snapshot, f"journal: no file at {path}: the snapshot alone", ok=False)
    if reader is None:
        reader = sealed_journal(JsonlRunJournal(path), keyring_from_env())
    try:
        events = await read_journal_tail(reader, snapshot)
        # A journal that lost events the snapshot knew it held (emptied, cut, another run's
        # file) folds "cleanly" to less than the run has: a restore refuses it, so does this.
        lost = await lost_events(reader, snapshot, events)
    finally:
        await reader.close()
    result = lost or fold_tail(snapshot, events)
    shown = mark_started_unsafe(
        result.snapshot, result.started_calls, _every_pending(result.snapshot)
    )
    if isinstance(result, Discarded):
        if durable:
            at = f" at seq {result.seq}" if result.seq is not None else ""
            note = (
                f"journal: {path} is damaged{at} ({result.reason}): a restore refuses it "
                '(on_damaged_journal="salvage" proceeds)'
            )
            return TailView(shown, note, ok=False)
        return TailView(shown, f"journal: tail of {path} discarded ({result.reason})", ok=True)
    span = f" (seq {events[0].seq}..{events[-1].seq})" if events else ""
    note = f"journal: folded {result.folded_events} events from {path}{span}"
    return TailView(shown, note)


def _every_pending(snapshot: CheckpointSnapshot) -> dict[str, frozenset[str]]:
    """Per agent, every tool named by a call it holds (a viewer does not know the effects)."""
    names: dict[str, set[str]] = {}
    for entry in snapshot.in_flight:
        names.setdefault(entry.assignee, set()).update(i.call.name for i in entry.state.pending)
    return {agent: frozenset(tools) for agent, tools in names.items()}

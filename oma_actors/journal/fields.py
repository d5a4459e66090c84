"""The v5 members of a snapshot (spec JR-10): the journal watermark, its ref, per-entry marks.

A run with a journal writes schema v5: v4 plus ``journalWatermarkSeq`` and ``journalRef`` at the
root and ``journalSeq`` and ``conversationLineage`` on each in-flight entry. A run without one
writes v4, byte for byte as before.

Reading is two steps on purpose. ``decode`` reads a v5 value as its v4 part: restoring without a
journal is a v4 restore (spec JR-11), and re-saving it writes v4 without the journal members, which
would describe a journal the run no longer keeps. ``adopt_journal_fields`` then reads the v5
members into the typed fields, for a restore that has the journal (it folds the tail and keeps
writing v5).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors.domain.snapshot import (
    JOURNAL_WRITE_VERSION,
    WRITE_VERSION,
    CheckpointSnapshot,
    ConversationLineage,
    InFlightTask,
)

if TYPE_CHECKING:
    from collections.abc import Mapping


def is_journaled(snapshot: CheckpointSnapshot) -> bool:
    """Whether ``snapshot`` belongs to a run with a journal (it is then written as v5)."""
    return snapshot.journal_watermark_seq is not None


def write_version(snapshot: CheckpointSnapshot) -> int:
    """The schema version ``encode`` writes for ``snapshot``: 5 with a journal, else 4."""
    return JOURNAL_WRITE_VERSION if is_journaled(snapshot) else WRITE_VERSION


def add_journal_members(out: dict[str, Any], snapshot: CheckpointSnapshot) -> None:
    """Add the v5 members of a journaled ``snapshot`` to its JSON object ``out``.

    The root gets ``journalWatermarkSeq`` and ``journalRef`` after the v4 members (where OMA
    writes them); each entry of ``out["inFlightTasks"]`` (built from ``snapshot.in_flight``, in
    its order) gets its ``journalSeq`` and ``conversationLineage``. A snapshot without a journal
    gets nothing, so its v4 text is unchanged.
    """
    if snapshot.journal_watermark_seq is None:
        return
    out["journalWatermarkSeq"] = snapshot.journal_watermark_seq
    if snapshot.journal_ref is not None:
        out["journalRef"] = dict(snapshot.journal_ref)
    for entry, item in zip(out["inFlightTasks"], snapshot.in_flight, strict=True):
        entry.update(entry_members(item))


def entry_members(item: InFlightTask) -> dict[str, Any]:
    """``journalSeq`` and ``conversationLineage`` of one entry, those that are set."""
    out: dict[str, Any] = {}
    if item.journal_seq is not None:
        out["journalSeq"] = item.journal_seq
    if item.conversation_lineage is not None:
        out["conversationLineage"] = lineage_to_json(item.conversation_lineage)
    return out


def lineage_to_json(lineage: ConversationLineage) -> list[list[list[int] | None]]:
    """OMA's JSON form: a list per message of ``null`` or a list of seqs per block."""
    return [[None if seqs is None else list(seqs) for seqs in message] for message in lineage]


def lineage_from_json(raw: Any) -> ConversationLineage | None:
    """The typed lineage of a validated ``conversationLineage`` (``None`` when absent).

    The validator let through only lists of ints (``checkpoint.validate``): each row is taken
    as it is, without an ``int()`` a seq and a generator a row (a 1000-turn entry's lineage:
    0.7 ms so, 0.3 ms now; P5).
    """
    if not isinstance(raw, list):
        return None
    return tuple(
        [tuple([None if seqs is None else tuple(seqs) for seqs in message]) for message in raw]
    )


def adopt_journal_fields(snapshot: CheckpointSnapshot) -> CheckpointSnapshot:
    """``snapshot`` with the v5 members of its ``source`` in the typed fields.

    A snapshot that already has them, or whose source is not v5, is returned unchanged. Entries
    are matched to their source entry by task id (never by position).
    """
    source = snapshot.source
    if is_journaled(snapshot) or source is None or source.get("version") != JOURNAL_WRITE_VERSION:
        return snapshot
    ref = source.get("journalRef")
    by_task: dict[str, Mapping[str, Any]] = {
        entry["taskId"]: entry
        for entry in source.get("inFlightTasks") or ()
        if isinstance(entry, dict) and isinstance(entry.get("taskId"), str)
    }
    entries = []
    for item in snapshot.in_flight:
        raw = by_task.get(item.task_id, {})
        mark = raw.get("journalSeq")
        entries.append(
            replace(
                item,
                journal_seq=mark if isinstance(mark, int) else None,
                conversation_lineage=lineage_from_json(raw.get("conversationLineage")),
            )
        )
    return replace(
        snapshot,
        journal_watermark_seq=int(source["journalWatermarkSeq"]),
        journal_ref=dict(ref) if isinstance(ref, dict) else None,
        in_flight=tuple(entries),
    )

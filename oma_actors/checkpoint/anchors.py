"""History anchors (decision D17): the compaction snapshots a journal-first run keeps.

A journal-first run overwrites its latest snapshot at each compaction, and the journal alone
cannot rebuild what a snapshot holds (task states, shared memory); so each compaction is also
kept under ``history_key(run_id, watermark)``. Its store metadata carries a small summary
(``AnchorSummary``: the boundary, the attempt, what was in flight) so that listing a run's
history reads no snapshot; ``state_at`` decodes only the one anchor it folds from.

On an atomic store the newest anchor is not copied at once: the latest snapshot is written with
the summary in its metadata (``latest_anchor``) and IS the anchor until the next compaction
overwrites it; that batch writes the copy (``uncopied_anchor``). A latest snapshot whose
metadata carries a summary therefore has no copy yet, and a history reads it as an anchor. A
run's last anchor (the terminal compaction, its largest snapshot) is then written once, not twice.

In a store that is one document (a FileStore) every anchor is in the file each write rewrites
and each restore parses; a run's snapshots grow with its completed tasks, so keeping every
compaction would grow the file with the square of the run's length (a 300-task chain wrote a
57 MB file, a 700-task one passed the store's size limit and its process was killed for its
memory). There the newest anchors are kept within ``ONE_DOCUMENT_ANCHOR_RATIO`` times the
latest snapshot's bytes, or ``ONE_DOCUMENT_ANCHOR_FLOOR`` (``anchors_beyond``): the history of a
long run starts at the oldest one kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from oma_actors.errors import CheckpointError
from oma_actors.journal.fold import tail_read_from
from oma_actors.keyspace import history_key, history_prefix, is_history_key_of
from oma_actors.stores.base import Put
from oma_actors.stores.prefix import list_under

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.checkpoint.manager import Checkpoint
    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.stores.base import MemoryEntry, MemoryStore

SUMMARY = "history"
"""The metadata member holding the summary."""

ONE_DOCUMENT_ANCHOR_RATIO = 8
"""In a one-document store, the anchors kept weigh at most this many times the latest snapshot,
or ``ONE_DOCUMENT_ANCHOR_FLOOR`` if that is more (the newest anchor is always kept)."""

ONE_DOCUMENT_ANCHOR_FLOOR = 4 * 1024 * 1024
"""Bytes of anchors a one-document store keeps whatever the latest snapshot's size: a small
run (a few tasks, a few approval rounds) keeps its whole history."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InFlightSummary:
    """One in-flight entry of an anchor: its task, agent, turns and open calls' tool names."""

    task_id: str
    agent: str
    turns: int
    calls: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnchorSummary:
    """What listing a history needs of one anchor (see the module docstring).

    ``read_from``: the first journal seq a fold of the anchor reads (``tail_read_from``);
    ``journal_ref``: the journal the anchor names (its ``journalRef``).
    """

    key: str
    boundary: str
    watermark: int
    read_from: int
    attempt: int
    created_at: str
    status: str
    completed: int
    tasks: int
    in_flight: tuple[InFlightSummary, ...]
    journal_ref: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The metadata form (the key is the entry's own)."""
        return {
            "boundary": self.boundary,
            "watermark": self.watermark,
            "readFrom": self.read_from,
            "attempt": self.attempt,
            "createdAt": self.created_at,
            "status": self.status,
            "completed": self.completed,
            "tasks": self.tasks,
            "inFlight": [
                {"taskId": e.task_id, "agent": e.agent, "turns": e.turns, "calls": e.calls}
                for e in self.in_flight
            ],
            "journalRef": self.journal_ref,
        }

    @classmethod
    def from_json(cls, key: str, raw: Mapping[str, Any]) -> AnchorSummary:
        """Read the metadata form back.

        Raises:
            KeyError, TypeError, ValueError: a malformed summary.
        """
        return cls(
            key=key,
            boundary=str(raw["boundary"]),
            watermark=int(raw["watermark"]),
            read_from=int(raw["readFrom"]),
            attempt=int(raw["attempt"]),
            created_at=str(raw["createdAt"]),
            status=str(raw["status"]),
            completed=int(raw["completed"]),
            tasks=int(raw["tasks"]),
            in_flight=tuple(
                InFlightSummary(
                    task_id=str(e["taskId"]),
                    agent=str(e["agent"]),
                    turns=int(e["turns"]),
                    calls={str(k): str(v) for k, v in dict(e["calls"]).items()},
                )
                for e in raw["inFlight"]
            ),
            journal_ref=dict(raw["journalRef"]) if raw.get("journalRef") is not None else None,
        )


def summarize(snapshot: CheckpointSnapshot, boundary: str) -> AnchorSummary:
    """The summary of ``snapshot`` kept as the anchor of ``boundary``."""
    watermark = snapshot.journal_watermark_seq or 0
    return AnchorSummary(
        key=history_key(snapshot.run_id, watermark),
        boundary=boundary,
        watermark=watermark,
        read_from=tail_read_from(snapshot),
        attempt=snapshot.attempt,
        created_at=snapshot.created_at,
        status=snapshot.status,
        completed=sum(task.status == "completed" for task in snapshot.tasks),
        tasks=len(snapshot.tasks),
        in_flight=tuple(
            InFlightSummary(
                task_id=e.task_id,
                agent=e.assignee,
                turns=e.state.turns,
                calls={p.call.id: p.call.name for p in e.state.pending},
            )
            for e in snapshot.in_flight
        ),
        journal_ref=snapshot.journal_ref,
    )


def anchor_put(
    checkpoint: Checkpoint, text: str, snapshot: CheckpointSnapshot, boundary: str
) -> Put:
    """The store write keeping ``text`` (the encoding of ``snapshot``) as a history anchor.

    The entry metadata is the checkpoint's (CK-03) plus the summary under ``SUMMARY``.
    """
    put = checkpoint.put(text, snapshot)
    summary = summarize(snapshot, boundary)
    metadata = {**(put.metadata or {}), SUMMARY: summary.to_json()}
    return replace(put, key=summary.key, metadata=metadata)


def latest_anchor(
    checkpoint: Checkpoint, text: str, snapshot: CheckpointSnapshot, boundary: str | None
) -> Put:
    """The write of the run's latest snapshot; with ``boundary``, it is also its newest anchor.

    The anchor is the latest entry itself: its metadata is the checkpoint's (CK-03) plus the
    summary under ``SUMMARY``; ``uncopied_anchor`` copies it when it is overwritten.
    """
    put = checkpoint.put(text, snapshot)
    if boundary is None:
        return put
    summary = summarize(snapshot, boundary)
    return replace(put, metadata={**(put.metadata or {}), SUMMARY: summary.to_json()})


def uncopied_anchor(key: str, value: str, metadata: Mapping[str, Any] | None) -> Put | None:
    """The copy to keep of a latest snapshot about to be overwritten, if it is an anchor.

    ``None`` when its metadata carries no summary (no anchor: a compaction the journal folds to
    exactly, or a snapshot of OMA's mode).

    Raises:
        CheckpointError: the metadata carries a summary that does not name its run and
            watermark (the anchor would be lost by the overwrite).
    """
    raw = (metadata or {}).get(SUMMARY)
    if raw is None:
        return None
    try:
        target = history_key(str((metadata or {})["runId"]), int(raw["watermark"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"the latest snapshot {key!r} holds a malformed anchor summary"
        ) from exc
    return Put(target, value, dict(metadata or {}))


async def history_entries(store: MemoryStore, run_id: str) -> list[MemoryEntry]:
    """The stored history anchors of ``run_id``, in key order (a run whose id continues
    ``run_id/`` keeps its own: ``keyspace.is_history_key_of``)."""
    return [
        entry
        for entry in await list_under(store, history_prefix(run_id))
        if is_history_key_of(run_id, entry.key)
    ]


async def history_keys(store: MemoryStore, run_id: str) -> list[str]:
    """The keys of the stored history anchors of ``run_id`` (D17), in key order: what a
    deletion of the run removes beside its checkpoint."""
    return [entry.key for entry in await history_entries(store, run_id)]


def anchors_beyond(
    kept: Sequence[MemoryEntry],
    adding: Put | None,
    latest_bytes: int,
    *,
    floor: int | None = None,
) -> list[str]:
    """The keys of the oldest anchors of ``kept`` (a run's, in key order, i.e. by watermark)
    that a one-document store drops as ``adding`` (the newest, always kept) is written.

    The newest are kept while together they weigh at most ``ONE_DOCUMENT_ANCHOR_RATIO`` times
    ``latest_bytes`` or ``floor`` (default ``ONE_DOCUMENT_ANCHOR_FLOOR``), whichever is more.
    Dropping only the oldest keeps every point from the oldest kept anchor on foldable (a fold
    never crosses a dropped anchor).
    """
    floor = ONE_DOCUMENT_ANCHOR_FLOOR if floor is None else floor
    budget = max(ONE_DOCUMENT_ANCHOR_RATIO * latest_bytes, floor)
    weight = len(adding.value) if adding is not None else 0
    newest = [entry for entry in kept if adding is None or entry.key != adding.key]
    drop: list[str] = []
    for entry in reversed(newest):
        weight += len(entry.value)
        if weight > budget and (adding is not None or entry is not newest[-1]):
            drop.append(entry.key)
    return drop

"""``list_checkpoints``: every run a store holds, read without a model call.

Operators ask "which runs are in this store, and where does each stand?" before they restore,
clean up or decide approvals. The answer comes from the snapshots alone. A value at a checkpoint
key that does not decode is listed as ``unreadable`` with its error, never skipped: a run that
silently disappears from a listing is a run nobody restores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.checkpoint.codec import decode
from oma_actors.errors import CheckpointError
from oma_actors.keyspace import CHECKPOINT_KEY_PREFIX
from oma_actors.stores.prefix import UnreadableEntry, list_each

if TYPE_CHECKING:
    from oma_actors.stores.base import MemoryStore


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSummary:
    """One stored run.

    Attributes:
        key: the checkpoint key.
        run_id: the run's id (empty when the snapshot is unreadable).
        status: ``in_progress``, ``suspended``, ``completed``, ``failed``, ``rejected``, or
            ``unreadable`` (see ``error``).
        attempt: the attempt that wrote the snapshot (0 when unreadable).
        revision: successful saves of the run (0 when unreadable or written by OMA).
        saved_at: the snapshot's ``createdAt`` (ISO-8601), empty when unreadable.
        error: why the value could not be read, for ``unreadable`` entries.
    """

    key: str
    run_id: str
    status: str
    attempt: int
    revision: int
    saved_at: str
    error: str | None = None


async def list_checkpoints(store: MemoryStore) -> list[CheckpointSummary]:
    """Summarize every checkpoint in ``store``, in the store's order.

    Args:
        store: any store; only keys under ``__oma_checkpoint__/`` are read.

    Returns:
        One summary per checkpoint key, unreadable values included (``status="unreadable"``).
    """
    found: list[CheckpointSummary] = []
    # Only the checkpoint keys are read: journal rows and run records stay in the store. Each
    # value on its own: one that does not open (an encrypted store's, under another key) is
    # listed as unreadable, never hides the others.
    for entry in await list_each(store, CHECKPOINT_KEY_PREFIX):
        if isinstance(entry, UnreadableEntry):
            found.append(_unreadable(entry.key, entry.error))
            continue
        try:
            snapshot = decode(entry.value, key=entry.key)
        except CheckpointError as exc:
            found.append(_unreadable(entry.key, str(exc)))
            continue
        found.append(
            CheckpointSummary(
                key=entry.key,
                run_id=snapshot.run_id,
                status=snapshot.status,
                attempt=snapshot.attempt,
                revision=snapshot.revision,
                saved_at=snapshot.created_at,
            )
        )
    return found


def _unreadable(key: str, error: str) -> CheckpointSummary:
    return CheckpointSummary(
        key=key, run_id="", status="unreadable", attempt=0, revision=0, saved_at="", error=error
    )

"""``Checkpoint``: save, load and delete one run's latest snapshot in a store (spec CK-02..CK-05).

It only saves and loads. When to save is the run's decision; how to resume is ``restore``'s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.checkpoint.codec import decode, encode
from oma_actors.errors import StoreError
from oma_actors.journal.fields import write_version
from oma_actors.keyspace import checkpoint_key
from oma_actors.stores.base import Put

if TYPE_CHECKING:
    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.stores.base import MemoryStore


class Checkpoint:
    """The latest snapshot of one run, at one key of one store.

    Args:
        store: any ``MemoryStore``.
        run_id: the run; the key is ``__oma_checkpoint__/<run_id>/latest``.
        key: an explicit key, which wins over ``run_id``.
    """

    def __init__(self, store: MemoryStore, *, run_id: str | None = None, key: str | None = None):
        self.store = store
        self.run_id = run_id
        self.key = key or checkpoint_key(run_id)

    async def load_latest(self) -> CheckpointSnapshot | None:
        """The stored snapshot, or ``None`` when the key is absent.

        Raises:
            StoreError: the store could not be read (retryable; nothing was written).
            CheckpointError: the stored value is not JSON or not a valid snapshot.
            UnsupportedSchemaError: the stored schema version is unknown.
        """
        try:
            entry = await self.store.get(self.key)
        except StoreError:
            raise
        except Exception as exc:
            # F10: a failed read is an error to retry, never "no checkpoint" (a fresh run would
            # overwrite the real one).
            raise StoreError(f"could not read checkpoint {self.key!r}: {exc}") from exc
        if entry is None:
            return None
        return decode(entry.value, key=self.key)

    async def save(self, snapshot: CheckpointSnapshot) -> str:
        """Write ``snapshot`` (schema v4, v5 with a journal) and return the exact text written.

        A snapshot without a run id takes this manager's (spec CK-03).
        """
        if not snapshot.run_id and self.run_id:
            snapshot = replace(snapshot, run_id=self.run_id)
        text = encode(snapshot)
        await self.write_encoded(text, snapshot)
        return text

    async def write_encoded(self, text: str, snapshot: CheckpointSnapshot) -> None:
        """Write ``text``, the encoding of ``snapshot``, with OMA's entry metadata (CK-03)."""
        put = self.put(text, snapshot)
        await self.store.set(put.key, put.value, put.metadata)

    def put(self, text: str, snapshot: CheckpointSnapshot) -> Put:
        """The store write of ``text`` (the encoding of ``snapshot``), for an atomic batch.

        Spec CK-03: the entry carries OMA's metadata (namespace, schema version, run id and
        creation time) so OMA's own tools recognise it. The version is the one ``encode`` wrote
        into ``text`` (5 for a journaled run), never a fixed 4.
        """
        metadata = {
            "namespace": "checkpoint",
            "version": write_version(snapshot),
            "runId": snapshot.run_id,
            "createdAt": snapshot.created_at,
        }
        return Put(self.key, text, metadata)

    async def delete(self) -> None:
        """Remove the snapshot."""
        await self.store.delete(self.key)

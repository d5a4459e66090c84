"""A compaction kept as a history anchor is one atomic store batch (D17, P3)."""

from __future__ import annotations

from typing import Any

from checkpoint_support import make_snapshot

from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.run_writer import RunWriter, Saved
from oma_actors.keyspace import history_prefix
from oma_actors.stores import InMemoryStore


class CountingStore(InMemoryStore):
    """Counts the store's writes: each is one whole-file rewrite on a FileStore."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[list[str]] = []

    async def set(self, key: str, value: str, metadata: Any = None) -> None:
        self.writes.append([key])
        await super().set(key, value, metadata)

    async def apply(self, checks: Any, writes: Any) -> bool:
        self.writes.append([w.key for w in writes])
        return await super().apply(checks, writes)


async def test_the_anchor_and_the_latest_snapshot_are_written_in_one_batch() -> None:
    store = CountingStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    writer = RunWriter(checkpoint, emit=lambda event: None)
    snapshot = make_snapshot(journal_watermark_seq=7)
    outcome = await writer._store(snapshot, anchor="terminal")
    assert isinstance(outcome, Saved)
    [batch] = store.writes  # one write: the anchor can never be missing beside its latest
    assert batch[1] == checkpoint.key
    assert batch[0].startswith(history_prefix("run-test"))
    assert (await store.get(batch[0])) is not None

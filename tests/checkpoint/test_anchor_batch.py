"""A compaction kept as a history anchor is one atomic store batch (D17, P3)."""

from __future__ import annotations

from typing import Any

import pytest
from checkpoint_support import make_snapshot

from oma_actors.checkpoint.anchors import SUMMARY, uncopied_anchor
from oma_actors.checkpoint.history import _anchors
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.run_writer import RunWriter, Saved
from oma_actors.errors import CheckpointError
from oma_actors.keyspace import history_key
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
    first = make_snapshot(journal_watermark_seq=7)
    assert isinstance(await writer._store(first, anchor="admission"), Saved)
    # The newest anchor is the latest snapshot itself: one write, no copy yet.
    assert store.writes == [[checkpoint.key]]
    latest = await store.get(checkpoint.key)
    assert latest is not None
    assert SUMMARY in (latest.metadata or {})
    second = make_snapshot(journal_watermark_seq=9)
    assert isinstance(await writer._store(second, anchor="terminal"), Saved)
    # The batch overwriting it keeps its copy: one write, never an anchor missing.
    [_, batch] = store.writes
    assert batch == [history_key("run-test", 7), checkpoint.key]
    copy = await store.get(history_key("run-test", 7))
    assert copy is not None
    assert copy.value == latest.value


async def test_a_latest_anchor_is_listed_by_the_history() -> None:
    store = InMemoryStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    writer = RunWriter(checkpoint, emit=lambda event: None)
    for seq in (7, 9):
        snapshot = make_snapshot(journal_watermark_seq=seq)
        assert isinstance(await writer._store(snapshot, anchor="admission"), Saved)
    anchors, values, _ = await _anchors(store, "run-test")
    assert [a.watermark for a in anchors] == [7, 9]
    assert values[history_key("run-test", 9)] == (await store.get(checkpoint.key)).value  # type: ignore[union-attr]


async def test_an_overwrite_without_an_anchor_still_keeps_the_latest_anchor() -> None:
    store = InMemoryStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    writer = RunWriter(checkpoint, emit=lambda event: None)
    assert isinstance(
        await writer._store(make_snapshot(journal_watermark_seq=7), anchor="admission"), Saved
    )
    # A compaction the journal folds to exactly keeps no anchor of its own (``outgrown``),
    # but it must not lose the one it overwrites: a restored attempt's writer reads the store.
    fresh = RunWriter(checkpoint, emit=lambda event: None)
    fresh._journal = object()  # type: ignore[assignment]
    assert isinstance(await fresh._store(make_snapshot(journal_watermark_seq=8)), Saved)
    assert await store.get(history_key("run-test", 7)) is not None
    latest = await store.get(checkpoint.key)
    assert latest is not None
    assert SUMMARY not in (latest.metadata or {})


async def test_a_plain_writer_copies_the_latest_anchor_an_earlier_attempt_left() -> None:
    store = InMemoryStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    first = RunWriter(checkpoint, emit=lambda event: None)
    assert isinstance(await first._store(make_snapshot(journal_watermark_seq=7), anchor="x"), Saved)
    # The next attempt writes without the batch path (OMA's mode): the anchor is kept first.
    later = RunWriter(checkpoint, emit=lambda event: None)
    assert isinstance(await later._store(make_snapshot(journal_watermark_seq=8)), Saved)
    copy = await store.get(history_key("run-test", 7))
    assert copy is not None
    assert SUMMARY in (copy.metadata or {})


class ReadCountingStore(CountingStore):
    """Counts the reads of each key too."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def get(self, key: str) -> Any:
        self.reads.append(key)
        return await super().get(key)


async def test_a_writer_reads_the_latest_snapshot_only_at_its_first_compaction() -> None:
    # The copy of the anchor a compaction overwrites comes from what the writer itself wrote
    # last; only its first compaction reads the store (what an earlier attempt left there).
    store = ReadCountingStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    writer = RunWriter(checkpoint, emit=lambda event: None)
    for seq in (7, 9, 11, 13):
        snapshot = make_snapshot(journal_watermark_seq=seq)
        assert isinstance(await writer._store(snapshot, anchor="admission"), Saved)
    assert store.reads.count(checkpoint.key) == 1
    for seq in (7, 9, 11):
        copy = await store.get(history_key("run-test", seq))
        assert copy is not None
        assert SUMMARY in (copy.metadata or {})


class FailingOnceStore(ReadCountingStore):
    """Refuses one batch (as a store that failed mid-write)."""

    fail_next = False

    async def apply(self, checks: Any, writes: Any) -> bool:
        if self.fail_next:
            self.fail_next = False
            raise OSError("disk full")
        return await super().apply(checks, writes)


async def test_after_a_failed_compaction_the_writer_reads_the_store_again() -> None:
    # A batch that failed leaves the store unknown: the next compaction reads what is there
    # rather than trusting what it meant to write, so no anchor is lost or invented.
    store = FailingOnceStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    writer = RunWriter(checkpoint, emit=lambda event: None)
    assert isinstance(
        await writer._store(make_snapshot(journal_watermark_seq=7), anchor="admission"), Saved
    )
    store.fail_next = True
    assert not isinstance(
        await writer._store(make_snapshot(journal_watermark_seq=9), anchor="admission"), Saved
    )
    reads = store.reads.count(checkpoint.key)
    assert isinstance(
        await writer._store(make_snapshot(journal_watermark_seq=11), anchor="admission"), Saved
    )
    assert store.reads.count(checkpoint.key) == reads + 1
    assert await store.get(history_key("run-test", 7)) is not None
    assert await store.get(history_key("run-test", 9)) is None


async def test_a_latest_anchor_whose_summary_is_malformed_is_not_overwritten() -> None:
    # Its copy cannot be named (no watermark): overwriting it would lose that anchor, so the
    # save is an outcome other than Saved and the stored snapshot stays as it was.
    store = InMemoryStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    writer = RunWriter(checkpoint, emit=lambda event: None)
    assert isinstance(
        await writer._store(make_snapshot(journal_watermark_seq=7), anchor="admission"), Saved
    )
    stored = await store.get(checkpoint.key)
    assert stored is not None
    metadata = dict(stored.metadata or {})
    metadata[SUMMARY] = {k: v for k, v in metadata[SUMMARY].items() if k != "watermark"}
    await store.set(checkpoint.key, stored.value, metadata)
    with pytest.raises(CheckpointError, match="malformed anchor summary"):
        uncopied_anchor(checkpoint.key, stored.value, metadata)
    fresh = RunWriter(checkpoint, emit=lambda event: None)
    outcome = await fresh._store(make_snapshot(journal_watermark_seq=9), anchor="task_completed")
    assert not isinstance(outcome, Saved)
    after = await store.get(checkpoint.key)
    assert after is not None
    assert after.value == stored.value

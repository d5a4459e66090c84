"""``JournalPath`` around a compaction's write (decisions D10 and D15), seen from the journal.

A boundary that compacts holds its events back until its snapshot is durable (``compacted``
releases them), so a crash during the write cannot leave them in the journal above a snapshot
that never landed. And each compaction names how far the journal holds the run (``vouch``:
``journalRef.through``), waiting for the previous compaction's released events first, so the
claim is not lower than what the run knows it wrote.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from note_team import note_team

from oma_actors import CheckpointOptions, OpenMultiAgent, Task, Team
from oma_actors.checkpoint import journal_path
from oma_actors.checkpoint.history import load_timeline
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal
from oma_actors.journal.base import read_run
from oma_actors.journal.event import JournalEvent
from oma_actors.keyspace import checkpoint_key
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import Expect, MemoryStore, Write
from oma_actors.testing.forwarding import ForwardingStore


def team() -> Team:
    return note_team(2, 1, "unsafe", lambda ctx: None)


def tasks(count: int) -> list[Task]:
    return [Task(f"task {i}", "x", assignee=("w", "v")[i], id=f"t{i}") for i in range(count)]


class Watching(ForwardingStore):
    """Before each write of run ``r1``'s latest snapshot, lets queued journal appends land and
    notes the seqs of the run's events the journal holds then (``seen``, one list a write)."""

    def __init__(self, inner: MemoryStore, journal: JsonlRunJournal) -> None:
        super().__init__(inner)
        self.journal = journal
        self.seen: list[list[int]] = []

    async def _look(self, key: str) -> None:
        if key == checkpoint_key("r1"):
            await asyncio.sleep(0.05)
            self.seen.append([event.seq for event in await read_run(self.journal, "r1")])

    async def set(self, key: str, value: str, metadata: Any = None) -> None:
        await self._look(key)
        await super().set(key, value, metadata)

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        for write in writes:
            await self._look(write.key)
        return await super()._apply(checks, writes)


async def test_a_fresh_runs_events_reach_the_journal_only_once_its_admission_is_durable(
    tmp_path: Path,
) -> None:
    """Guards ``JournalPath.compacted`` as the one place a compaction releases its events: while
    the admission snapshot (a fresh run's first save, a compaction) is being written, the
    journal holds nothing of the run; once it is written, the events follow, none lost."""
    journal = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0)
    store = Watching(InMemoryStore(), journal)
    try:
        result = await OpenMultiAgent().run_tasks(
            team(), tasks(2),
            checkpoint=CheckpointOptions(store=store, run_id="r1"),
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
        assert result.success
        assert store.seen[0] == [], "the admission's events were in the journal before it"
        assert len(store.seen) < 10, "journal-first: most boundaries were journal appends"
        seqs = [event.seq for event in await read_run(journal, "r1")]
    finally:
        await journal.close()
    assert seqs == list(range(1, len(seqs) + 1)), "every event reached the journal, in order"


class SlowJournal(InMemoryRunJournal):
    """An in-memory journal whose every append takes 20 ms (a slow disk)."""

    async def append(self, events: Sequence[JournalEvent]) -> None:
        await asyncio.sleep(0.02)
        await super().append(events)


async def test_each_compaction_claims_the_events_the_previous_one_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards ``JournalPath.vouch``'s wait for the previous compaction's events: with every
    boundary compacting (no journal-only save between two compactions makes anything durable)
    on a slow journal, each compaction's ``journalRef.through`` still names at least the
    previous compaction's watermark, the events that compaction released. Without the wait the
    claim lags (or is never made), and a restore could not tell a journal that lost them."""
    monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)
    monkeypatch.setattr(journal_path, "TAIL_RATIO", 0)
    journal = SlowJournal()
    store = InMemoryStore()
    result = await OpenMultiAgent().run_tasks(
        team(), tasks(1),
        checkpoint=CheckpointOptions(store=store, run_id="r1"),
        journal=JournalOptions(journal, durable=True),
    )  # fmt: skip
    assert result.success
    anchors = (await load_timeline(store, "r1", journal=journal)).anchors
    assert len(anchors) > 5, "every boundary compacted"
    for previous, anchor in itertools.pairwise(anchors):
        through = (anchor.journal_ref or {}).get("through")
        assert isinstance(through, int), (anchor.boundary, anchor.watermark, through)
        assert through >= previous.watermark, (anchor.boundary, anchor.watermark, through)

"""History anchors in a store that is one document (a FileStore) are kept within a budget.

Each compaction of a journal-first run keeps its snapshot as a history anchor (D17), and a run's
snapshots grow with its completed tasks: kept in the one file every save rewrites and every
restore parses, they grew it with the square of the run's length (a 300-task chain wrote a
57 MB state file; a 700-task one passed the store's size limit, every save then failed and the
process was killed for its memory). In a one-document store the newest anchors are kept within
``ONE_DOCUMENT_ANCHOR_RATIO`` times the latest snapshot; the history starts at the oldest one
kept, and every point from there on still folds. A store where an anchor costs only its bytes
keeps them all.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.checkpoint import anchors as anchors_module
from oma_actors.checkpoint import fork_run, run_history, state_at
from oma_actors.checkpoint.anchors import ONE_DOCUMENT_ANCHOR_RATIO, anchors_beyond, history_entries
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.keyspace import checkpoint_key
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.stores.base import MemoryEntry, MemoryStore, Put
from oma_actors.testing import ScriptedAdapter

TASKS = 40


async def chain(store: MemoryStore, journal: JsonlRunJournal, answer_chars: int = 2000) -> None:
    """``TASKS`` tasks in a chain, each answered with ``answer_chars`` characters: each
    completion is a compaction (an anchor) and each snapshot is larger than the one before."""
    answer = LLMResponse([TextBlock("r" * answer_chars)], usage=TokenUsage(1, 1))
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(lambda m, o: answer))])
    tasks = [
        Task(f"t{i}", "x", id=f"t{i}", assignee="w", depends_on=[f"t{i - 1}"] if i else [])
        for i in range(TASKS)
    ]
    result = await OpenMultiAgent().run_tasks(
        team, tasks, checkpoint=CheckpointOptions(store=store, run_id="r"),
        journal=JournalOptions(journal),
    )  # fmt: skip
    assert result.success


async def test_a_file_store_keeps_the_newest_anchors_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No floor: this run's snapshots are small, and the floor would keep them all.
    monkeypatch.setattr(anchors_module, "ONE_DOCUMENT_ANCHOR_FLOOR", 0)
    store = FileStore(tmp_path / "s.json")
    journal = JsonlRunJournal(tmp_path / "j.jsonl")
    await chain(store, journal)
    anchors = await history_entries(store, "r")
    latest = await store.get(checkpoint_key("r"))
    assert latest is not None
    assert 1 < len(anchors) < TASKS  # the oldest went
    assert sum(len(a.value) for a in anchors) <= ONE_DOCUMENT_ANCHOR_RATIO * len(latest.value)
    points = await run_history(store, "r", journal=journal)
    # The history starts at the oldest anchor kept, and every point from there on folds.
    assert points[0].seq >= int(anchors[0].key.rsplit("/", 1)[1])
    for point in points[:: max(len(points) // 6, 1)]:
        assert (await state_at(store, "r", point.seq, journal=journal)).run_id == "r"
    await fork_run(store, "r", at_seq=points[0].seq, new_run_id="child", journal=journal)
    await journal.close()


async def test_a_small_run_keeps_its_whole_history_in_a_file_store(tmp_path: Path) -> None:
    # Within the floor: a run of a few tasks or approval rounds can be forked from its start.
    store = FileStore(tmp_path / "s.json")
    journal = JsonlRunJournal(tmp_path / "j.jsonl")
    await chain(store, journal, answer_chars=200)
    await journal.close()
    assert len(await history_entries(store, "r")) >= TASKS


async def test_a_store_where_an_anchor_costs_its_bytes_keeps_them_all(tmp_path: Path) -> None:
    store = InMemoryStore()
    journal = JsonlRunJournal(tmp_path / "j.jsonl")
    await chain(store, journal)
    await journal.close()
    assert len(await history_entries(store, "r")) >= TASKS


def test_the_oldest_anchors_go_first_and_the_newest_always_stays() -> None:
    def entry(seq: int, size: int) -> MemoryEntry:
        key = f"__oma_history__/r/{seq:012d}"
        return MemoryEntry(key=key, value="x" * size, metadata=None, created_at=datetime.now(UTC))

    kept = [entry(1, 100), entry(2, 200), entry(3, 300)]
    adding = Put("__oma_history__/r/000000000004", "x" * 400, None)
    ratio = ONE_DOCUMENT_ANCHOR_RATIO
    # Budgets in (900, 950] and (700, 750]: 400+300+200 fits the first, 400+300 the second.
    assert anchors_beyond(kept, adding, 950 // ratio, floor=0) == [kept[0].key]
    assert anchors_beyond(kept, adding, 750 // ratio, floor=0) == [kept[1].key, kept[0].key]
    everything_older = [e.key for e in reversed(kept)]
    assert anchors_beyond(kept, adding, 1, floor=0) == everything_older  # adding stays
    assert anchors_beyond(kept, None, 1, floor=0) == [kept[1].key, kept[0].key]  # newest stays
    assert anchors_beyond(kept, adding, 1, floor=1000) == []  # within the floor

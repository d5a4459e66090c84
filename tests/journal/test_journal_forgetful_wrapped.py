"""A journal that forgets on a crash what its store keeps is never the save path, wrapped or not
(``journal_setup.forgets_before``).

An in-memory journal beside a persistent store would make every journal-only save weaker than
the snapshot it replaces: a crash loses the dispatch marks and results it "saved", and the
restore runs a recorded call again. Before, only a bare ``InMemoryRunJournal`` was recognised:
sealed by an ``EncryptingJournal`` beside a ``FileStore``, it saved 37 of 39 boundaries in memory
alone. The other way round, an in-memory store behind a wrapper wrote a snapshot at every
boundary although nothing there outlives the process.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from journal_first import Ledger, the_task

from oma_actors import CheckpointOptions, OpenMultiAgent
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import InMemoryRunJournal, JournalOptions
from oma_actors.journal.encrypting import EncryptingJournal
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.stores.keyring import KeyRing
from oma_actors.testing.forwarding import ForwardingStore

if TYPE_CHECKING:
    from pathlib import Path

    from oma_actors.journal import RunJournal
    from oma_actors.stores import CheckpointStore


async def _saves(journal: RunJournal, store: CheckpointStore) -> Counter[str]:
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(
        Ledger().team(), the_task(),
        checkpoint=CheckpointOptions(store=store, run_id="forgetful"),
        journal=JournalOptions(journal, durable=True),
    )  # fmt: skip
    assert result.success
    return Counter(event.mode for event in events if isinstance(event, CheckpointSaved))


def _sealed(journal: RunJournal) -> EncryptingJournal:
    return EncryptingJournal(journal, KeyRing({"k1": bytes(range(32))}, active="k1"))


async def test_a_sealed_in_memory_journal_beside_a_file_store_saves_by_snapshots(
    tmp_path: Path,
) -> None:
    saves = await _saves(_sealed(InMemoryRunJournal()), FileStore(tmp_path / "state.json"))
    assert saves["journal"] == 0
    assert saves["snapshot"] > 2


async def test_an_in_memory_journal_beside_a_wrapped_in_memory_store_saves_by_the_journal() -> None:
    saves = await _saves(InMemoryRunJournal(), ForwardingStore(InMemoryStore()))
    assert saves["journal"] > 0
    assert saves["snapshot"] == 2  # the admission and the run's end

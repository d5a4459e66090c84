"""Guard: ``RunWriter._lease_held`` (``checkpoint/run_writer.py``), the check ``fence_journal``
installs as a JSONL journal's ``guard_appends``.

A journal file cannot carry the lease's fence (D11), so before each batch the writer re-reads
the run record (``confirm_lost``). A holder stalled past its lease, taken over while it does
not know yet (no heartbeat, nothing latched), must learn of the takeover before its next batch
is appended, not after: the batch is dropped, reported as ``RUN_LEASE_LOST``, and the file
holds not one line of it.
"""

from __future__ import annotations

from pathlib import Path

from oma_actors.checkpoint import Checkpoint, RunWriter
from oma_actors.events import JournalAppendFailed, ProgressEvent
from oma_actors.journal import JournalRecorder, JsonlRunJournal
from oma_actors.journal import vocabulary as v
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FakeClock


async def test_a_stalled_holder_learns_of_the_takeover_before_its_next_append(
    tmp_path: Path,
) -> None:
    store = InMemoryStore()
    clock = FakeClock()

    def ledger(owner: str) -> RunLedger:
        return RunLedger(MemoryStoreRunStore(store), owner=owner, lease_ttl=1, clock=clock.unix)

    holder = await ledger("a").acquire("r", heartbeat=False)
    path = tmp_path / "run.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    failures: list[JournalAppendFailed] = []
    progress: list[ProgressEvent] = []
    try:
        recorder = await JournalRecorder.open(
            journal, run_id="r", attempt=1, on_error=failures.append
        )
        writer = RunWriter(Checkpoint(store, run_id="r"), emit=progress.append, fence=holder)
        # A JSONL file cannot carry the fence: the writer refuses it as the save path and
        # guards its appends instead.
        assert writer.fence_journal(recorder) is False

        recorder.emit(v.turn_started(turn=1))
        await recorder.flush()
        assert len(path.read_text().splitlines()) == 1  # the lease is held: it lands
        assert failures == []

        clock.advance(5)  # the holder stalls past its lease ...
        await ledger("b").acquire("r", heartbeat=False)  # ... and is taken over
        assert holder.lost is None  # it does not know yet: nothing latched the loss

        recorder.emit(v.turn_ended(turn=1, outcome="completed"))
        await recorder.flush()
    finally:
        await journal.close()
    assert len(path.read_text().splitlines()) == 1, "the stale holder's batch landed"
    [failure] = failures
    assert "RUN_LEASE_LOST" in failure.error, failure
    assert holder.lost is not None
    assert holder.lost.code == "RUN_LEASE_LOST"

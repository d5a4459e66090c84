"""``JournalRecorder`` on a journal with ``append_nowait`` (JSONL, SQLite): events go straight
into the journal's shared batch, and each waiting call waits on a future of its own."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors.journal import (
    JournalAppendError,
    JournalClosedError,
    JournalRecorder,
    JsonlRunJournal,
    SqliteRunJournal,
)
from oma_actors.journal import vocabulary as v

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from pathlib import Path

    from oma_actors.journal.sql import AppendPart, PartResult


class Gated:
    """A journal whose commits wait until ``open()``: appenders are caught mid-batch."""

    def __init__(self, journal: JsonlRunJournal | SqliteRunJournal) -> None:
        self.journal = journal
        self._thread_gate = threading.Event()
        self._loop_gate = asyncio.Event()
        if isinstance(journal, JsonlRunJournal):
            real_write = journal._write

            def write(text: str) -> None:  # on the journal's writer thread
                self._thread_gate.wait(timeout=30)
                real_write(text)

            journal._write = write  # type: ignore[method-assign]
        else:
            real_transact = journal._transact

            async def transact(
                parts: Sequence[AppendPart], results: list[PartResult | None]
            ) -> None:
                await self._loop_gate.wait()
                await real_transact(parts, results)

            journal._transact = transact  # type: ignore[method-assign]

    def open(self) -> None:
        """Let the held commit (and every later one) through."""
        self._thread_gate.set()
        self._loop_gate.set()


BACKENDS: dict[str, Any] = {
    "jsonl": lambda path: JsonlRunJournal(path / "shared.jsonl", flush_interval_ms=0),
    "sqlite": lambda path: SqliteRunJournal(path / "shared.db"),
}


@pytest.fixture(params=sorted(BACKENDS))
async def gated(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Gated]:
    """A gated JSONL or SQLite journal, opened (table created) before the test's appends."""
    journal = BACKENDS[request.param](tmp_path)
    await journal.read_from(1)
    gate = Gated(journal)
    try:
        yield gate
    finally:
        gate.open()
        await journal.close()


async def test_a_cancelled_appender_sees_cancelled_error_and_the_batch_lands_for_all(
    gated: Gated,
) -> None:
    doomed_run = await JournalRecorder.open(gated.journal, run_id="a", attempt=1, durable=True)
    other_run = await JournalRecorder.open(gated.journal, run_id="b", attempt=1, durable=True)
    doomed = asyncio.create_task(doomed_run.append(v.turn_started(turn=1)))
    survivor = asyncio.create_task(other_run.append(v.turn_started(turn=1)))
    for _ in range(5):  # both are waiting; the batch holding both events is committing
        await asyncio.sleep(0)
    assert not doomed.done()
    assert not survivor.done()
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed  # at once, while the batch is still held
    assert not survivor.done()
    gated.open()
    assert (await survivor).seq == 1
    # The cancelled call only stopped waiting: its event is in the batch, and landed.
    await doomed_run.durable_through(1)
    assert doomed_run.appended_seq == 1
    stored = await gated.journal.read_from(1)
    assert sorted((e.run_id, e.seq) for e in stored) == [("a", 1), ("b", 1)]


async def test_a_cancelled_durable_through_leaves_the_batch_to_the_others(gated: Gated) -> None:
    recorder = await JournalRecorder.open(gated.journal, run_id="a", attempt=1, durable=True)
    recorder.emit(v.turn_started(turn=1))
    waiting = [asyncio.create_task(recorder.durable_through(1)) for _ in range(2)]
    appending = asyncio.create_task(recorder.append(v.turn_started(turn=2)))
    for _ in range(5):
        await asyncio.sleep(0)
    waiting[0].cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]
    gated.open()
    await waiting[1]
    assert (await appending).seq == 2
    assert recorder.appended_seq == 2


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_an_event_the_journal_refuses_at_once_fails_its_own_batch(
    backend: str, tmp_path: Path
) -> None:
    journal = BACKENDS[backend](tmp_path)
    recorder = await JournalRecorder.open(journal, run_id="a", attempt=1, durable=True)
    await journal.close()
    recorder.emit(v.turn_started(turn=1))  # emit never raises, even on a closed journal
    with pytest.raises(JournalAppendError, match=r"events 1\.\.1 .*JournalClosedError"):
        await recorder.durable_through(1)
    with pytest.raises(JournalClosedError):
        await recorder.append(v.turn_started(turn=2))


async def test_flush_waits_for_the_batches_handed_to_the_journal(tmp_path: Path) -> None:
    journal = JsonlRunJournal(tmp_path / "j.jsonl", flush_interval_ms=30)
    recorder = await JournalRecorder.open(journal, run_id="a", attempt=1)  # OMA's mode
    for turn in (1, 2, 3):
        recorder.emit(v.turn_started(turn=turn))
    await recorder.flush()
    assert [e.seq for e in await journal.read_from(1)] == [1, 2, 3]
    assert recorder.appended_seq == 3
    await journal.close()


async def test_released_events_go_to_the_journal_in_seq_order(tmp_path: Path) -> None:
    journal = JsonlRunJournal(tmp_path / "j.jsonl", flush_interval_ms=0)
    recorders = [
        await JournalRecorder.open(journal, run_id=run, attempt=1, durable=True)
        for run in ("a", "b")
    ]
    for turn in (1, 2):
        for recorder in recorders:
            recorder.emit(v.turn_started(turn=turn))
    # Held until released (durable mode): each run's release hands its events over in order.
    await asyncio.gather(*(r.durable_through(2) for r in recorders))
    stored = [(e.run_id, e.seq) for e in await journal.read_from(1)]
    assert stored == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    await journal.close()

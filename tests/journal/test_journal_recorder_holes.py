"""``JournalRecorder`` in durable mode: what a failed, cancelled or refused batch leaves behind.

A failed batch is a hole in the journal: ``durable_through`` must keep failing for it until a
durable snapshot covers every event the batch held, and ``appended_seq`` (what a compaction's
``journalRef`` claims the journal holds, D15) must never count it. A batch the journal cancels
is a failed one, and a leased run's check (``guard_appends``) drops the batch it refuses.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors import LeaseError
from oma_actors.events import JournalAppendFailed
from oma_actors.journal import (
    InMemoryRunJournal,
    JournalAppendError,
    JournalEvent,
    JournalRecorder,
    JsonlRunJournal,
)
from oma_actors.journal import vocabulary as v

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


class FailingJournal(InMemoryRunJournal):
    """Fails its next ``failures`` appends (a full disk); later ones land."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def append(self, events: Sequence[JournalEvent]) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        await super().append(events)


class CancellingJournal(InMemoryRunJournal):
    """A journal with its own batching (``append_nowait``) whose batch futures the test settles."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[asyncio.Future[Any]] = []

    def append_nowait(self, events: Sequence[JournalEvent], *, now: bool) -> asyncio.Future[Any]:
        token: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.tokens.append(token)
        return token


async def test_a_cover_below_the_last_event_of_a_failed_batch_keeps_its_hole() -> None:
    """Guards ``cover``'s filter on a failed batch's LAST seq: a snapshot covering only part
    of a failed batch (through seq 2 of 1..3) leaves seq 3 lost, so ``durable_through(3)``
    still raises; only a cover through 3 makes the hole moot."""
    recorder = await JournalRecorder.open(FailingJournal(1), run_id="r", attempt=1, durable=True)
    for turn in (1, 2, 3):
        recorder.emit(v.turn_started(turn=turn))
    with pytest.raises(JournalAppendError, match=r"journal events 1\.\.3"):
        await recorder.durable_through(3)
    recorder.cover(2)
    with pytest.raises(JournalAppendError, match=r"journal events 1\.\.3"):
        await recorder.durable_through(3)
    recorder.cover(3)
    await recorder.durable_through(3)


async def test_a_failed_batch_never_counts_as_appended() -> None:
    """Guards ``_landed``: only a batch that landed moves ``appended_seq``. A failed one
    counted would let the next compaction claim the journal holds events it never got."""
    journal = FailingJournal(1)
    recorder = await JournalRecorder.open(journal, run_id="r", attempt=1, durable=True)
    recorder.emit(v.turn_started(turn=1))
    with pytest.raises(JournalAppendError):
        await recorder.durable_through(1)
    assert recorder.appended_seq == 0
    await recorder.append(v.turn_started(turn=2))  # lands; seq 1 is still a hole below it
    assert recorder.appended_seq == 2
    assert [e.seq for e in await journal.read_from(0)] == [2]


async def test_a_batch_the_journal_cancelled_is_a_failed_batch() -> None:
    """Guards ``_token_done``: a journal batch future that was cancelled (its commit cut short
    as the loop closes) may or may not have landed, so it fails its events like an error:
    reported, not appended, and ``durable_through`` raises instead of calling them durable."""
    reported: list[JournalAppendFailed] = []
    journal = CancellingJournal()
    recorder = await JournalRecorder.open(
        journal, run_id="r", attempt=1, durable=True, on_error=reported.append
    )
    recorder.emit(v.turn_started(turn=1))
    recorder.release(1)  # handed to the journal's open batch
    assert len(journal.tokens) == 1
    journal.tokens[0].cancel()
    with pytest.raises(JournalAppendError, match=r"journal events 1\.\.1 .*cancelled"):
        await recorder.durable_through(1)
    assert recorder.appended_seq == 0
    assert len(reported) == 1
    assert "cancelled" in reported[0].error


async def _lease_lost() -> None:
    raise LeaseError("RUN_LEASE_LOST", "the run was taken over")


@pytest.mark.parametrize("durable", [False, True])
async def test_a_batch_whose_lease_check_fails_is_dropped(tmp_path: Path, durable: bool) -> None:
    """Guards the ``guard_appends`` check in ``_drain_pending``: on a JSONL journal (which
    cannot carry a lease's fence, D11) a holder taken over appends nothing after its check
    raised: the batch is dropped and reported, and a durable ``append`` raises the loss."""
    path = tmp_path / "leased.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    reported: list[JournalAppendFailed] = []
    recorder = await JournalRecorder.open(
        journal, run_id="r", attempt=1, durable=durable, on_error=reported.append
    )
    checks: list[int] = []

    async def held() -> None:
        checks.append(recorder.last_seq)

    recorder.guard_appends(held)
    await recorder.append(v.turn_started(turn=1))  # the check passed: the batch lands
    assert checks == [1]
    recorder.guard_appends(_lease_lost)
    if durable:
        with pytest.raises(LeaseError, match="taken over"):
            await recorder.append(v.turn_started(turn=2))
    else:
        await recorder.append(v.turn_started(turn=2))
    await recorder.flush()
    await journal.close()
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1]
    assert recorder.appended_seq == 1
    assert len(reported) == 1
    assert "RUN_LEASE_LOST" in reported[0].error

"""``JournalRecorder``: seqs across attempts, batching, both failure modes, lineage."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from oma_actors.domain.messages import Message, TextBlock
from oma_actors.events import JournalAppendFailed
from oma_actors.journal import (
    InMemoryRunJournal,
    JournalAppendError,
    JournalEvent,
    JournalLineageError,
    JournalRecorder,
    JsonlRunJournal,
    verify_run,
)
from oma_actors.journal import vocabulary as v

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


class FlakyJournal(InMemoryRunJournal):
    """Fails the next ``failures`` appends; records the batches it is given."""

    def __init__(self, failures: int = 0, *, unreadable: bool = False) -> None:
        super().__init__()
        self.failures = failures
        self.unreadable = unreadable
        self.batches: list[list[int]] = []

    async def append(self, events: Sequence[JournalEvent]) -> None:
        self.batches.append([e.seq for e in events])
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        await super().append(events)

    async def read_from(self, seq: int) -> list[JournalEvent]:
        if self.unreadable:
            raise OSError("unreadable")
        return await super().read_from(seq)


async def test_seqs_strictly_increase_and_are_stamped() -> None:
    journal = InMemoryRunJournal()
    recorder = await JournalRecorder.open(journal, run_id="run-1", attempt=1, clock=lambda: 1.5)
    first = recorder.emit(v.turn_started(turn=1))
    second = recorder.emit(v.turn_ended(turn=1, outcome="completed"))
    assert (first.seq, second.seq, recorder.last_seq) == (1, 2, 2)
    await recorder.flush()
    written = await journal.read_from(0)
    assert [e.seq for e in written] == [1, 2]
    assert (written[0].run_id, written[0].attempt, written[0].timestamp_unix_ms) == (
        "run-1",
        1,
        1500,
    )


async def test_a_new_attempt_continues_from_the_journal_tail() -> None:
    journal = InMemoryRunJournal()
    first = await JournalRecorder.open(journal, run_id="run-1", attempt=1)
    first.emit(v.turn_started(turn=1))
    first.emit(v.turn_started(turn=2))
    await first.flush()
    resumed = await JournalRecorder.open(journal, run_id="run-1", attempt=2, watermark_seq=1)
    assert resumed.emit(v.turn_started(turn=3)).seq == 3
    await resumed.flush()
    assert [(e.seq, e.attempt) for e in await journal.read_from(0)] == [(1, 1), (2, 1), (3, 2)]


async def test_a_fresh_journal_continues_above_the_snapshot_watermark() -> None:
    recorder = await JournalRecorder.open(
        InMemoryRunJournal(), run_id="run-1", attempt=2, watermark_seq=41
    )
    assert recorder.emit(v.turn_started(turn=1)).seq == 42


async def test_other_runs_in_the_journal_do_not_move_the_seq() -> None:
    journal = InMemoryRunJournal()
    other = await JournalRecorder.open(journal, run_id="other", attempt=1)
    for turn in range(5):
        other.emit(v.turn_started(turn=turn))
    await other.flush()
    mine = await JournalRecorder.open(journal, run_id="run-1", attempt=1)
    assert mine.emit(v.turn_started(turn=1)).seq == 1


async def test_events_emitted_while_a_batch_is_in_flight_form_the_next_batch() -> None:
    journal = FlakyJournal()
    recorder = await JournalRecorder.open(journal, run_id="run-1", attempt=1)
    recorder.emit(v.turn_started(turn=1))
    recorder.emit(v.turn_started(turn=2))
    await asyncio.sleep(0.01)
    recorder.emit(v.turn_started(turn=3))
    recorder.emit(v.turn_started(turn=4))
    await recorder.flush()
    assert journal.batches == [[1, 2], [3, 4]]


async def test_best_effort_mode_reports_a_failed_batch_once_and_keeps_recording() -> None:
    reported: list[JournalAppendFailed] = []
    journal = FlakyJournal(failures=1)
    recorder = await JournalRecorder.open(
        journal, run_id="run-1", attempt=1, on_error=reported.append
    )
    await recorder.append(v.turn_started(turn=1))  # does not raise in OMA's mode
    assert len(reported) == 1
    assert reported[0].run_id == "run-1"
    assert "disk full" in reported[0].error
    await recorder.append(v.turn_started(turn=2))
    assert len(reported) == 1
    assert [e.seq for e in await journal.read_from(0)] == [2]


async def test_a_raising_callback_never_breaks_the_run() -> None:
    def explode(_: JournalAppendFailed) -> None:
        raise RuntimeError("callback bug")

    recorder = await JournalRecorder.open(
        FlakyJournal(failures=1), run_id="run-1", attempt=1, on_error=explode
    )
    await recorder.append(v.turn_started(turn=1))


async def test_durable_mode_raises_the_batch_error_and_returns_after_it_is_on_disk(
    tmp_path: Path,
) -> None:
    failing = await JournalRecorder.open(
        FlakyJournal(failures=1), run_id="run-1", attempt=1, durable=True
    )
    with pytest.raises(OSError, match="disk full"):
        await failing.append(v.turn_started(turn=1))

    path = tmp_path / "durable.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=5)
    recorder = await JournalRecorder.open(journal, run_id="run-1", attempt=1, durable=True)
    saved = await recorder.append(v.checkpoint_saved(mode="file", version=5, watermark_seq=0))
    assert path.read_text().count("\n") == 1  # on disk when append returned
    assert (await JsonlRunJournal(path).read_from(0))[0] == saved
    await journal.close()


async def test_unreadable_tail_is_reported_in_best_effort_mode_and_raises_when_durable() -> None:
    reported: list[JournalAppendFailed] = []
    recorder = await JournalRecorder.open(
        FlakyJournal(unreadable=True), run_id="r", attempt=1, watermark_seq=3,
        on_error=reported.append,
    )  # fmt: skip
    assert len(reported) == 1
    assert recorder.emit(v.turn_started(turn=1)).seq == 4
    with pytest.raises(OSError, match="unreadable"):
        await JournalRecorder.open(
            FlakyJournal(unreadable=True), run_id="r", attempt=1, durable=True
        )


async def test_lineage_is_by_block_identity_and_enforced_when_asked() -> None:
    tracked, untracked = TextBlock("hello"), TextBlock("hello")
    recorder = await JournalRecorder.open(InMemoryRunJournal(), run_id="r", attempt=1)
    recorder.register_blocks([tracked], [7])
    assert recorder.lineage_for(tracked) == [7]
    assert recorder.lineage_for(untracked) is None
    assert recorder.hash_for(tracked) == recorder.hash_for(untracked)
    blocks = recorder.request_blocks([Message("user", [tracked, untracked])])
    assert [b["sourceEventSeqs"] for b in blocks] == [[7], None]

    strict = await JournalRecorder.open(
        InMemoryRunJournal(), run_id="r", attempt=1, enforce_lineage=True
    )
    strict.register_blocks([tracked], [7])
    strict.request_blocks([Message("user", [tracked])])
    with pytest.raises(JournalLineageError) as caught:
        strict.request_blocks([Message("user", [tracked]), Message("assistant", [untracked])])
    assert (caught.value.message_index, caught.value.block_index) == (1, 0)
    assert caught.value.code == "MISSING_CONTEXT_REPLACE"


async def test_a_recorded_round_verifies() -> None:
    journal = InMemoryRunJournal()
    rec = await JournalRecorder.open(journal, run_id="r", attempt=1)
    prompt = Message("user", [TextBlock("question")])
    asked = rec.emit(v.user_message(message=prompt, origin="input"))
    rec.register_blocks(prompt.content, [asked.seq])
    request = rec.emit(v.llm_request(turn=1, model="m", blocks=rec.request_blocks([prompt])))
    answer = Message("assistant", [TextBlock("answer")])
    said = rec.emit(v.assistant_message(message=answer, source_event_seqs=[request.seq]))
    rec.register_blocks(answer.content, [said.seq])
    rec.emit(v.llm_request(turn=2, model="m", blocks=rec.request_blocks([prompt, answer])))
    await rec.flush()
    result = await verify_run(journal)
    assert (result.ok, result.failures, result.inconclusive) == (True, [], [])
    assert result.stats == {"events": 4, "requests": 2, "blocks_checked": 3}


async def test_a_cancelled_durable_append_does_not_fail_the_others() -> None:
    journal = FlakyJournal()
    recorder = await JournalRecorder.open(journal, run_id="r", attempt=1, durable=True)
    doomed = asyncio.create_task(recorder.append(v.turn_started(turn=1)))
    survivor = asyncio.create_task(recorder.append(v.turn_started(turn=2)))
    await asyncio.sleep(0)
    doomed.cancel()
    assert (await survivor).seq == 2
    await recorder.flush()
    assert [e.seq for e in await journal.read_from(0)] == [1, 2]


async def test_durable_mode_keeps_emitted_events_until_the_writer_takes_them() -> None:
    recorder = await JournalRecorder.open(InMemoryRunJournal(), run_id="r", attempt=1, durable=True)
    for turn in (1, 2, 3):
        recorder.emit(v.turn_started(turn=turn))
    assert [e.seq for e in recorder.take_through(2)] == [1, 2]
    assert [e.seq for e in recorder.take_through(2)] == []
    assert [e.seq for e in recorder.take_through(9)] == [3]
    best_effort = await JournalRecorder.open(InMemoryRunJournal(), run_id="r", attempt=1)
    best_effort.emit(v.turn_started(turn=1))
    assert best_effort.take_through(9) == []  # OMA's mode keeps nothing


async def test_durable_through_waits_for_the_batch_and_a_hole_fails_until_covered() -> None:
    journal = FlakyJournal(failures=1)
    recorder = await JournalRecorder.open(journal, run_id="r", attempt=1, durable=True)
    recorder.emit(v.turn_started(turn=1))  # seq 1: its batch fails
    with pytest.raises(JournalAppendError, match=r"journal events 1\.\.1"):
        await recorder.durable_through(1)
    recorder.emit(v.turn_started(turn=2))  # seq 2 lands, but seq 1 is a hole below it
    with pytest.raises(JournalAppendError):
        await recorder.durable_through(2)
    assert [e.seq for e in await journal.read_from(0)] == [2]
    recorder.cover(1)  # a snapshot holds the run through seq 1: the hole no longer matters
    await recorder.durable_through(2)


async def test_durable_through_returns_only_once_the_events_are_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=30)
    recorder = await JournalRecorder.open(journal, run_id="r", attempt=1, durable=True)
    recorder.emit(v.turn_started(turn=1))
    recorder.emit(v.turn_started(turn=2))
    assert not path.exists() or path.read_text() == ""  # still in the batching window
    await recorder.durable_through(2)
    assert path.read_text().count("\n") == 2
    await journal.close()


async def test_a_durable_recorder_holds_events_until_the_writer_releases_them() -> None:
    journal = InMemoryRunJournal()
    recorder = await JournalRecorder.open(journal, run_id="r", attempt=1, durable=True)
    recorder.emit(v.turn_started(turn=1))
    recorder.emit(v.turn_started(turn=2))
    await recorder.flush()
    assert await journal.read_from(0) == []  # held: the snapshot they belong to is not durable
    recorder.release(1)
    await recorder.flush()
    assert [e.seq for e in await journal.read_from(0)] == [1]
    recorder.emit(v.turn_started(turn=3))  # after a held event: held too, order is kept
    recorder.release(3)
    await recorder.flush()
    assert [e.seq for e in await journal.read_from(0)] == [1, 2, 3]


async def test_at_the_end_only_events_that_change_no_state_are_released() -> None:
    journal = InMemoryRunJournal()
    recorder = await JournalRecorder.open(journal, run_id="r", attempt=1, durable=True)
    recorder.emit(v.run_ended(status="ok"))
    recorder.release_trailing()
    await recorder.flush()
    assert [e.type for e in await journal.read_from(0)] == ["run/end"]
    # A final answer whose snapshot never became durable must not reach the journal: a restore
    # could not fold it and would discard the whole tail.
    answer = Message("assistant", [TextBlock("done")])
    recorder.emit(v.assistant_message(message=answer, task_id="t", agent_name="w"))
    recorder.emit(v.run_ended(status="error"))
    recorder.release_trailing()
    await recorder.flush()
    assert [e.type for e in await journal.read_from(0)] == ["run/end"]

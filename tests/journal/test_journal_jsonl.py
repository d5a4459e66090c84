"""``JsonlRunJournal`` and ``InMemoryRunJournal``: batching, group commit, torn tails, redaction."""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors.errors import ConfigurationError, StoreError
from oma_actors.journal import (
    InMemoryRunJournal,
    JournalClosedError,
    JournalCorruptError,
    JournalEvent,
    JsonlRunJournal,
    RunJournal,
    to_json_line,
)
from oma_actors.journal import jsonl as jsonl_module
from oma_actors.journal import jsonl_marks as jsonl_marks_module
from oma_actors.journal.marks import DispatchMark

if TYPE_CHECKING:
    from pathlib import Path


def event(seq: int, **data: Any) -> JournalEvent:
    return JournalEvent(
        seq=seq,
        type="turn/start",
        run_id="run-1",
        attempt=1,
        timestamp_unix_ms=1_700_000_000_000 + seq,
        data=data or {"turn": seq},
    )


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        # The journal file's fsyncs (a new file's folder is fsynced once, with its first batch).
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            calls.append(fd)
        real(fd)

    monkeypatch.setattr("oma_actors.journal.jsonl.os.fsync", counting)
    return calls


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


async def test_round_trip_and_read_from(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    assert isinstance(journal, RunJournal)
    await journal.append([event(1), event(2)])
    await journal.append([event(3)])
    await journal.close()
    assert lines(path) == [to_json_line(event(s)) for s in (1, 2, 3)]
    read = await JsonlRunJournal(path).read_from(2)
    assert [e.seq for e in read] == [2, 3]
    assert read[0] == event(2)
    assert JsonlRunJournal(path).describe() == {"kind": "JsonlRunJournal", "path": str(path)}


async def test_missing_file_is_an_empty_journal(tmp_path: Path) -> None:
    assert await JsonlRunJournal(tmp_path / "absent.jsonl").read_from(0) == []


async def test_concurrent_appends_in_one_window_share_one_write_and_one_fsync(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    journal = JsonlRunJournal(tmp_path / "group.jsonl", flush_interval_ms=20)
    await asyncio.gather(*(journal.append([event(s)]) for s in range(1, 11)))
    assert len(fsyncs) == 1
    await journal.append([event(11)])
    assert len(fsyncs) == 2
    await journal.close()
    assert len(lines(tmp_path / "group.jsonl")) == 11


async def test_appends_made_in_one_turn_of_the_loop_share_a_zero_window(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    # Concurrent runs on one file (P13): a window of 0 closes on the loop's next turn, so the
    # appends of one turn ride one batch; a batch written at its first append would take one.
    journal = JsonlRunJournal(tmp_path / "turn.jsonl", flush_interval_ms=0)
    await asyncio.gather(*(journal.append_now([event(s)]) for s in range(1, 11)))
    assert len(fsyncs) == 1
    await journal.close()
    assert len(lines(tmp_path / "turn.jsonl")) == 10


async def test_appends_return_only_after_the_fsync(tmp_path: Path, fsyncs: list[int]) -> None:
    journal = JsonlRunJournal(tmp_path / "d.jsonl", flush_interval_ms=0)
    await journal.append([event(1)])
    assert fsyncs  # the append returned after its batch was fsynced
    await journal.close()


async def test_the_window_is_opened_by_the_first_event_and_not_extended(tmp_path: Path) -> None:
    path = tmp_path / "window.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=1000)
    loop = asyncio.get_running_loop()
    started = loop.time()
    first = asyncio.create_task(journal.append([event(1)]))
    await asyncio.sleep(0.5)
    second = asyncio.create_task(journal.append([event(2)]))
    await asyncio.sleep(0.1)
    assert not path.exists() or path.read_text() == ""  # still inside the window
    await first
    elapsed = loop.time() - started
    # The deadline is the first append's (1.0 s); a window that reset would end at 1.5 s.
    assert 0.99 <= elapsed < 1.4
    assert second.done()  # the same batch
    assert len(lines(path)) == 2
    await journal.close()


async def test_a_batch_accumulates_while_the_previous_is_on_its_way_to_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    real_write = os.write

    def slow_write(fd: int, data: Any) -> int:
        writes.append(bytes(data).count(b"\n"))
        import time

        time.sleep(0.1)
        return real_write(fd, data)

    monkeypatch.setattr("oma_actors.journal.jsonl.os.write", slow_write)
    journal = JsonlRunJournal(tmp_path / "acc.jsonl", flush_interval_ms=0)
    first = asyncio.create_task(journal.append([event(1)]))
    await asyncio.sleep(0.03)  # the first batch is now in os.write
    rest = [asyncio.create_task(journal.append([event(s)])) for s in (2, 3, 4)]
    await asyncio.gather(first, *rest)
    assert writes == [1, 3]
    await journal.close()


async def test_torn_trailing_line_is_not_written_and_cut_before_the_next_append(
    tmp_path: Path,
) -> None:
    path = tmp_path / "torn.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    await journal.append([event(1), event(2)])
    await journal.close()
    with path.open("a") as file:
        file.write('{"type":"turn/start","seq":3,"run')
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1, 2]

    again = JsonlRunJournal(path, flush_interval_ms=0)
    await again.append([event(3)])
    await again.close()
    assert lines(path) == [to_json_line(event(s)) for s in (1, 2, 3)]
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1, 2, 3]


async def test_a_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "nonl.jsonl"
    path.write_text(to_json_line(event(1)))
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    await journal.append([event(2)])
    await journal.close()
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1, 2]


async def test_a_bad_line_in_the_middle_raises_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.jsonl"
    path.write_text(f"{to_json_line(event(1))}\nnot json\n{to_json_line(event(3))}\n")
    with pytest.raises(JournalCorruptError) as caught:
        await JsonlRunJournal(path).read_from(0)
    assert (caught.value.line, caught.value.field) == (2, "json")


async def test_a_line_that_is_no_utf8_in_the_middle_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(
        f"{to_json_line(event(1))}\n".encode()
        + b'{"type":"\xff"}\n'
        + to_json_line(event(3)).encode()
    )
    with pytest.raises(JournalCorruptError, match="not UTF-8") as caught:
        await JsonlRunJournal(path).read_from(0)
    assert (caught.value.line, caught.value.field) == (2, "json")


async def test_a_failed_write_is_cut_off_and_reported_to_every_waiter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "fail.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    await journal.append([event(1)])

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("oma_actors.journal.jsonl.os.fsync", failing_fsync)
    results = await asyncio.gather(
        journal.append([event(2)]), journal.append([event(3)]), return_exceptions=True
    )
    assert all(isinstance(r, StoreError) for r in results)
    assert lines(path) == [to_json_line(event(1))]  # the failed batch's bytes were cut off
    monkeypatch.undo()
    await journal.append([event(2)])
    await journal.close()
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1, 2]


async def test_a_torn_append_it_could_not_cut_off_is_repaired_by_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "torn.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    await journal.append([event(1)])
    real_write = os.write
    calls = 0

    def half_then_fail(fd: int, data: bytes | memoryview) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(5, "Input/output error")

    def failing_ftruncate(fd: int, length: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("oma_actors.journal.jsonl.os.write", half_then_fail)
    monkeypatch.setattr("oma_actors.journal.jsonl.os.ftruncate", failing_ftruncate)
    with pytest.raises(StoreError, match="cutting it off failed"):
        await journal.append([event(2)])
    monkeypatch.undo()
    assert not path.read_bytes().endswith(b"\n")  # half a line sits at the end
    await journal.append([event(2)])  # cuts the torn line off before it writes
    await journal.close()
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1, 2]


async def test_redaction_happens_at_write_time(tmp_path: Path) -> None:
    path = tmp_path / "redacted.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0, redact=[r"hunter2"])
    message = {"role": "user", "content": [{"type": "text", "text": "password is hunter2"}]}
    await journal.append(
        [event(1, message=message, origin="input", apiKey="sk-abcdefghijklmnopqrstuv", n=1.0)]
    )
    await journal.close()
    text = path.read_text()
    assert "hunter2" not in text
    assert "sk-abc" not in text
    assert '"apiKey":"[redacted]"' in text
    assert '"n":1,"seq":1,' in text  # numbers keep JavaScript's layout through redaction
    (persisted,) = await JsonlRunJournal(path).read_from(0)
    assert "[redacted]" in persisted.data["message"]["content"][0]["text"]


async def test_close_flushes_the_open_batch_and_later_appends_raise(tmp_path: Path) -> None:
    path = tmp_path / "closed.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=10_000)
    pending = asyncio.create_task(journal.append([event(1)]))
    await asyncio.sleep(0)
    await journal.close()
    await pending
    assert len(lines(path)) == 1
    with pytest.raises(JournalClosedError):
        await journal.append([event(2)])
    with pytest.raises(JournalClosedError):
        await journal.append([])  # nothing to write is still a write to a closed journal
    # A dispatch mark too: a call must not be told its dispatch is durable by a closed journal.
    mark = DispatchMark(run_id="r", seq=1, task_id="t", agent_name="x", call_id="c")
    with pytest.raises(JournalClosedError):
        await journal.mark(mark)
    assert not (tmp_path / "closed.jsonl.marks").exists()


async def test_in_memory_journal_is_a_ring_buffer() -> None:
    journal = InMemoryRunJournal(max_events=3)
    await journal.append([event(1), event(2)])
    await journal.append([event(3), event(4), event(5)])
    assert journal.size == 3
    assert [e.seq for e in await journal.read_from(0)] == [3, 4, 5]
    assert [e.seq for e in await journal.read_from(5)] == [5]
    assert journal.describe() == {"kind": "InMemoryRunJournal"}
    await journal.close()
    with pytest.raises(JournalClosedError):
        await journal.append([event(6)])


@pytest.mark.parametrize("bound", [0, -1, 1.5, True])
def test_in_memory_journal_refuses_a_bad_bound(bound: Any) -> None:
    with pytest.raises(ConfigurationError, match="positive integer"):
        InMemoryRunJournal(max_events=bound)


async def test_a_cancelled_appender_does_not_cancel_the_batch_of_the_others(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cancel.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=50)
    doomed = asyncio.create_task(journal.append([event(1)]))
    survivor = asyncio.create_task(journal.append([event(2)]))
    await asyncio.sleep(0.01)
    doomed.cancel()
    await survivor
    await journal.close()
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1, 2]


async def test_append_now_skips_the_window_but_still_shares_the_batch(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    journal = JsonlRunJournal(tmp_path / "j.jsonl", flush_interval_ms=10_000)
    slow = asyncio.ensure_future(journal.append([event(1)]))
    await asyncio.sleep(0)
    # A durable writer's append closes the open window: both land in one write and one fsync.
    await asyncio.wait_for(journal.append_now([event(2)]), 5)
    await asyncio.wait_for(slow, 5)
    assert len(fsyncs) == 1
    assert [e.seq for e in await journal.read_from(0)] == [1, 2]
    await journal.close()


async def test_read_from_skips_older_lines_unparsed_and_still_checks_the_rest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    good = [to_json_line(event(seq)) for seq in range(1, 6)]
    # Line 2 is damaged before its seq (the fields a line ends with): below the tail it is not
    # read, in it it raises.
    damaged = good[1].replace('"turn":2,', '"turn":@@,')
    assert damaged != good[1]
    path.write_text("\n".join([good[0], damaged, *good[2:]]) + "\n")
    journal = JsonlRunJournal(path)
    assert [e.seq for e in await journal.read_from(3)] == [3, 4, 5]
    with pytest.raises(JournalCorruptError, match="line 2"):
        await journal.read_from(2)
    with pytest.raises(JournalCorruptError, match="line 2"):
        await journal.read_from(0)


async def test_a_journal_that_cannot_be_opened_for_reading_is_a_store_error(
    tmp_path: Path,
) -> None:
    journal = JsonlRunJournal(tmp_path / ("x" * 300 + ".jsonl"))  # over NAME_MAX
    with pytest.raises(StoreError, match="journal read failed"):
        await journal.read_run("r")
    with pytest.raises(StoreError, match="journal read failed"):
        await journal.read_range("r", 1)
    with pytest.raises(StoreError, match="journal read failed"):
        await journal.read_from(0)


def disk_error(*args: Any, **kwargs: Any) -> Any:
    """A stand-in for a read of a disk failing under it."""
    raise OSError(errno.EIO, "Input/output error")


async def test_a_journal_whose_read_fails_midway_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "eio.jsonl"
    path.write_text(to_json_line(event(1)) + "\n")
    monkeypatch.setattr(jsonl_module, "scan_run", disk_error)
    with pytest.raises(StoreError, match=r"journal read failed: .*Input/output error"):
        await JsonlRunJournal(path).read_run("run-1")
    monkeypatch.setattr(jsonl_module, "read_regular", disk_error)  # the whole-file read
    with pytest.raises(StoreError, match=r"journal read failed: .*Input/output error"):
        await JsonlRunJournal(path).read_from(0)


async def test_a_dispatch_mark_that_cannot_be_written_raises(tmp_path: Path) -> None:
    # The call it marks must not run: a failed mark is never taken for a durable one. The
    # journal's own name fits NAME_MAX; its marks file's (``.marks`` added) does not.
    journal = JsonlRunJournal(tmp_path / ("x" * 249 + ".jsonl"), flush_interval_ms=0)
    mark = DispatchMark(run_id="run-1", seq=1, task_id="t", agent_name="x", call_id="c")
    try:
        with pytest.raises(StoreError, match="dispatch mark failed"):
            await journal.mark(mark)
    finally:
        await journal.close()


async def test_a_damaged_dispatch_mark_is_named_and_a_torn_last_one_is_not_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.jsonl"
    good = DispatchMark(run_id="run-1", seq=1, task_id="t", agent_name="x", call_id="c")
    marks = tmp_path / "m.jsonl.marks"
    marks.write_bytes(good.to_json() + b'\n{"runId":"run-1","seq":\n' + good.to_json()[:20])
    journal = JsonlRunJournal(path)
    with pytest.raises(JournalCorruptError) as caught:
        await journal.marks_of("run-1")  # a mark lost mid-file is never skipped silently
    assert caught.value.line == 2
    marks.write_bytes(good.to_json() + b"\n" + good.to_json()[:20])
    assert await journal.marks_of("run-1") == [good]


async def test_a_dispatch_marks_read_failing_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_marks_module, "read_regular", disk_error)
    with pytest.raises(StoreError, match="dispatch marks read failed"):
        await JsonlRunJournal(tmp_path / "m.jsonl").marks_of("run-1")

"""``JsonlRunJournal.read_run`` seeks (``jsonl_scan``): its answer is always the whole-file one.

Every case compares ``read_run`` with the whole file read and filtered (``read_from``), on files
a seek could get wrong: other runs' lines, a torn tail, the run's order broken above the seek
point, and a run directory that no longer describes the file (replaced, truncated, rewritten).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from oma_actors.journal import (
    JournalCorruptError,
    JournalEvent,
    JsonlRunJournal,
    jsonl_scan,
    to_json_line,
)
from oma_actors.journal.codec import PLAIN_HEAD, SEQ_KEY, TAIL, peek_run, peek_seq
from oma_actors.journal.jsjson import js_dumps

if TYPE_CHECKING:
    from pathlib import Path


def event(run_id: str, seq: int, text: str = "x") -> JournalEvent:
    return JournalEvent(
        seq=seq,
        type="turn/start",
        run_id=run_id,
        attempt=1,
        timestamp_unix_ms=1_700_000_000_000,
        data={"turn": seq, "text": text},
    )


def write(path: Path, events: list[JournalEvent], tail: str = "") -> None:
    path.write_text("".join(f"{to_json_line(e)}\n" for e in events) + tail, encoding="utf-8")


def old_layout(e: JournalEvent) -> str:
    """``e``'s line as versions before OMA's key order wrote it: ``type``, then the base fields
    (``seq``, ``timestampUnixMs``, ``runId``, ``attempt``, ``taskId``, ``agentName``,
    ``traceId``, ``spanId``, ``sourceEventSeqs``), then the variant's."""
    out: dict[str, object] = {
        "type": e.type,
        "seq": e.seq,
        "timestampUnixMs": e.timestamp_unix_ms,
        "runId": e.run_id,
        "attempt": e.attempt,
    }
    named = {
        "taskId": e.task_id,
        "agentName": e.agent_name,
        "traceId": e.trace_id,
        "spanId": e.span_id,
        "sourceEventSeqs": e.source_event_seqs,
    }
    out.update({key: value for key, value in named.items() if value is not None})
    out.update(e.data)
    return js_dumps(out)


def scoped(run_id: str, seq: int) -> JournalEvent:
    """An event with every optional base field some of the time (traceId last when set)."""
    traced = seq % 2 == 1
    return JournalEvent(
        seq=seq,
        type="tool/result" if seq % 3 else "turn/start",
        run_id=run_id,
        attempt=1 + seq // 5,
        timestamp_unix_ms=1_700_000_000_000 + seq,
        task_id="t-pay" if seq % 4 else None,
        agent_name="worker" if seq % 4 else None,
        trace_id="0af7651916cd43dd8448eb211c80319c" if traced else None,
        span_id="b7ad6b7169203331" if traced else None,
        source_event_seqs=[seq - 1] if seq > 1 else None,
        # A payload that spells the stamped fields, nested and in a string: a peek must read the
        # line's own (in the earlier layout, the line's last ``,"seq":`` is this nested one's).
        data={
            "turn": seq,
            "record": {"n": 1, "seq": 99, "timestampUnixMs": 5, "runId": "zz", "attempt": 9},
            "text": ',"seq":1,"timestampUnixMs":1,"runId":"zz","attempt":1}',
        },
    )


async def whole(journal: JsonlRunJournal, run_id: str, seq: int) -> list[tuple[str, int]]:
    return [(e.run_id, e.seq) for e in await journal.read_from(seq) if e.run_id == run_id]


async def seek(journal: JsonlRunJournal, run_id: str, seq: int) -> list[tuple[str, int]]:
    return [(e.run_id, e.seq) for e in await journal.read_run(run_id, seq)]


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts whole-file reads, to show the seek is what answered."""
    calls: list[int] = []
    real = JsonlRunJournal._read_all

    def counted(self: JsonlRunJournal, start: int = 0) -> list[JournalEvent]:
        calls.append(start)
        return real(self, start)

    monkeypatch.setattr(JsonlRunJournal, "_read_all", counted)
    return calls


async def test_other_runs_lines_are_skipped_and_the_seek_answers(
    tmp_path: Path, scans: list[int]
) -> None:
    path = tmp_path / "j.jsonl"
    events = [event(run, seq) for seq in range(1, 9) for run in ("a", "b", "a-b")]
    write(path, events)
    journal = JsonlRunJournal(path)
    assert await seek(journal, "a", 5) == [("a", s) for s in range(5, 9)]
    assert await seek(journal, "b", 8) == [("b", 8)]
    assert await seek(journal, "a", 9) == []  # the run's last line is the seek point
    assert scans == []
    assert await seek(journal, "a", 5) == await whole(journal, "a", 5)


async def test_a_torn_trailing_line_is_not_written(tmp_path: Path, scans: list[int]) -> None:
    path = tmp_path / "j.jsonl"
    torn = to_json_line(event("a", 4))[:-9]  # its seq and run are readable, the rest is not
    write(path, [event("a", s) for s in range(1, 4)], tail=torn)
    journal = JsonlRunJournal(path)
    assert await seek(journal, "a", 3) == [("a", 3)]
    assert await seek(journal, "a", 4) == []
    assert scans == []
    assert await seek(journal, "a", 3) == await whole(journal, "a", 3)


async def test_a_seek_point_that_is_not_the_predecessor_reads_the_whole_file(
    tmp_path: Path, scans: list[int]
) -> None:
    # Seq 5 was written before seq 2: the run's order is broken. The last line of the run
    # below 5 is 2, not 4, so the seek is not trusted and the whole file is read: the fold
    # then sees seq 5 and 6 as the whole-file read always showed them.
    path = tmp_path / "j.jsonl"
    write(path, [event("a", 1), event("a", 5), event("b", 1), event("a", 2), event("a", 6)])
    journal = JsonlRunJournal(path)
    assert await seek(journal, "a", 5) == [("a", 5), ("a", 6)]
    assert scans == [5]
    assert await seek(journal, "a", 5) == await whole(journal, "a", 5)


async def test_a_run_id_spelled_with_escapes_is_read_from_the_whole_file(
    tmp_path: Path, scans: list[int]
) -> None:
    # Another writer may spell run "a" as "\u0061": only a parse says whose line it is.
    path = tmp_path / "j.jsonl"
    other = to_json_line(event("a", 2)).replace('"runId":"a"', '"runId":"\\u0061"')
    write(path, [event('q"1', 1), event("a", 1)], tail=other + "\n")
    journal = JsonlRunJournal(path)
    assert await seek(journal, "a", 2) == [("a", 2)]
    assert await seek(journal, 'q"1', 1) == [('q"1', 1)]
    assert scans == [2, 1]


async def test_a_fresh_run_asks_the_directory_which_follows_later_appends(
    tmp_path: Path, scans: list[int]
) -> None:
    path = tmp_path / "j.jsonl"
    write(path, [event("a", s) for s in range(1, 4)])
    journal = JsonlRunJournal(path)
    assert await seek(journal, "new", 1) == []
    assert journal._directory.runs == {b"a"}
    writer = JsonlRunJournal(path, flush_interval_ms=0)
    await writer.append([event("new", 1), event("new", 2)])
    await writer.close()
    assert await seek(journal, "new", 1) == [("new", 1), ("new", 2)]
    assert scans == []


def replace_middle_line(path: Path, *, in_place: bool, line: int) -> None:
    lines = path.read_bytes().split(b"\n")
    swapped = lines[line].replace(b'"runId":"a"', b'"runId":"c"')
    assert len(swapped) == len(lines[line])
    assert swapped != lines[line]
    lines[line] = swapped
    data = b"\n".join(lines)
    if in_place:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
    else:
        other = path.with_suffix(".new")
        other.write_bytes(data)
        os.replace(other, path)


@pytest.mark.parametrize(
    ("in_place", "line"),
    [(False, 2), (True, 0)],
    ids=["replaced-file-same-probes", "rewritten-in-place-from-its-start"],
)
async def test_a_stale_directory_is_scanned_again(
    tmp_path: Path, in_place: bool, line: int
) -> None:
    path = tmp_path / "j.jsonl"
    write(path, [event("a", s, text="y" * 2000) for s in range(1, 6)])
    journal = JsonlRunJournal(path)
    assert await seek(journal, "c", 1) == []  # builds the directory: no run "c"
    replace_middle_line(path, in_place=in_place, line=line)
    assert await seek(journal, "c", 1) == await whole(journal, "c", 1) != []


async def test_a_truncated_and_regrown_file_is_scanned_again(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write(path, [event("a", s, text="y" * 2000) for s in range(1, 6)])
    journal = JsonlRunJournal(path)
    assert await seek(journal, "c", 1) == []
    # Cut back to the first three lines and regrown by as many bytes with run "c": the same
    # inode, start and size; only the bytes before the directory's offset tell.
    kept = b"".join(line + b"\n" for line in path.read_bytes().split(b"\n")[:3])
    size = path.stat().st_size
    os.truncate(path, len(kept))
    with path.open("ab") as file:
        file.writelines(
            f"{to_json_line(event('c', s, text='y' * 2000))}\n".encode() for s in (1, 2)
        )
    assert path.stat().st_size == size
    assert await seek(journal, "c", 1) == await whole(journal, "c", 1) != []


async def test_the_directory_does_not_guess_an_escaped_run_id(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write(path, [event("a", 1)])
    journal = JsonlRunJournal(path)
    assert await seek(journal, "n", 1) == []  # builds the directory
    other = to_json_line(event("n", 1)).replace('"runId":"n"', '"runId":"\\u006e"')
    with path.open("a", encoding="utf-8") as file:
        file.write(other + "\n")
    assert await seek(journal, "n", 1) == [("n", 1)]


def test_the_scanner_reads_backwards_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_scan, "_FIRST_CHUNK", 7)  # lines split across many chunks
    path = tmp_path / "j.jsonl"
    write(path, [event(run, seq) for seq in range(1, 30) for run in ("a", "b")])
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        lines = jsonl_scan.scan_run(fd, size, b"b", 20, str(path))
        everything = jsonl_scan.scan_run(fd, size, b"b", 1, str(path))
    finally:
        os.close(fd)
    assert lines is not None
    assert everything is not None
    assert [(seq, peek_run(line)) for seq, line in lines] == [(s, (s, b"b")) for s in range(20, 30)]
    assert len(everything) == 29


async def test_a_line_longer_than_the_directorys_chunk_is_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_scan, "_MAX_CHUNK", 64)  # every line is longer than a chunk
    path = tmp_path / "j.jsonl"
    write(path, [event("a", 1)])
    journal = JsonlRunJournal(path)
    assert await seek(journal, "b", 1) == []
    with path.open("a", encoding="utf-8") as file:
        file.write(to_json_line(event("b", 1)) + "\n")
    assert await seek(journal, "b", 1) == [("b", 1)]


@pytest.mark.parametrize("spelled", ["a", "\\u0061", 'x\\"y', "\\\\"])
@pytest.mark.parametrize("layout", ["oma", "old"])
def test_a_peek_reads_a_run_id_as_spelled_plain_or_escaped(spelled: str, layout: str) -> None:
    written = to_json_line(event("a", 7)) if layout == "oma" else old_layout(event("a", 7))
    line = written.replace('"runId":"a"', f'"runId":"{spelled}"').encode()
    assert peek_run(line) == (7, spelled.encode())
    assert peek_seq(line) == 7
    # The backward scan's match a line: the tail (the layout we write) reads every spelling
    # (the scan compares it with the run's); an earlier version's line is read by the plain
    # head, and not at all with an escaped run id (whose run is then read from the whole file).
    tail = TAIL.fullmatch(line, line.rfind(SEQ_KEY))
    head = PLAIN_HEAD.match(line)
    if layout == "oma":
        assert tail is not None
        assert tail.groups() == (b"7", spelled.encode())
        assert head is None
    else:
        assert tail is None
        if "\\" in spelled:
            assert head is None
        else:
            assert head is not None
            assert head.groups() == (b"turn/start", b"7", spelled.encode())


async def test_a_file_of_both_layouts_is_read_right_by_the_seek_the_peeks_and_the_whole_read(
    tmp_path: Path, scans: list[int]
) -> None:
    # A journal written across an upgrade: its first lines in the layout earlier versions wrote
    # (base fields first), the rest as OMA writes them (base fields last). Every reader must
    # read both: the seek without falling back to the whole file, the peeks line by line, and
    # the whole-file read (which skips the lines below its seq by their peeked seq).
    path = tmp_path / "j.jsonl"
    events = [scoped(run, seq) for seq in range(1, 13) for run in ("a", "b")]
    old, new = events[:12], events[12:]  # seqs 1-6 old, 7-12 as OMA writes them
    text = "".join(f"{old_layout(e)}\n" for e in old) + "".join(f"{to_json_line(e)}\n" for e in new)
    path.write_text(text, encoding="utf-8")
    lines = path.read_bytes().split(b"\n")[:-1]
    assert lines[0].startswith(b'{"type":"tool/result","seq":1,')
    assert lines[-3].endswith(b',"attempt":3,"traceId":"0af7651916cd43dd8448eb211c80319c"}')
    assert [(peek_run(line), peek_seq(line)) for line in lines] == [
        ((e.seq, e.run_id.encode()), e.seq) for e in events
    ]
    journal = JsonlRunJournal(path)
    for run in ("a", "b"):
        for start in range(1, 14):
            got = await journal.read_run(run, start)
            assert got == [e for e in events if e.run_id == run and e.seq >= start]
        kinds = await journal.read_range(run, 2, 11, types=["turn/start"])
        assert kinds == [e for e in events if e.run_id == run and e.seq in (3, 6, 9)]
    assert scans == []  # every answer was the seek's
    for start in (0, 3, 7, 12):
        assert await journal.read_from(start) == [e for e in events if e.seq >= start]
    assert await seek(journal, "a", 4) == await whole(journal, "a", 4)


@pytest.mark.parametrize("layout", ["oma", "old"])
async def test_read_from_skips_lines_below_its_seq_unparsed_in_either_layout(
    tmp_path: Path, layout: str
) -> None:
    # Line 2 is damaged where no peek looks (its payload): below the seq asked for it is not
    # read, at or above it it raises; so its seq was read without parsing it.
    encode = to_json_line if layout == "oma" else old_layout
    good = [encode(scoped("a", seq)) for seq in range(1, 6)]
    damaged = good[1].replace('"turn":2,', '"turn":@@,')
    assert damaged != good[1]
    path = tmp_path / "j.jsonl"
    path.write_text("\n".join([good[0], damaged, *good[2:]]) + "\n", encoding="utf-8")
    journal = JsonlRunJournal(path)
    assert [e.seq for e in await journal.read_from(3)] == [3, 4, 5]
    assert [e.seq for e in await journal.read_run("a", 3)] == [3, 4, 5]
    with pytest.raises(JournalCorruptError, match="line 2"):
        await journal.read_from(2)


async def test_a_type_spelled_with_escapes_is_read_from_the_whole_file_when_types_are_asked(
    tmp_path: Path, scans: list[int]
) -> None:
    # ``turn\/start`` is ``turn/start``: only a parse can say so, so a read by type that meets
    # it on a line of its run reads the whole file rather than guess.
    path = tmp_path / "j.jsonl"
    escaped = to_json_line(event("a", 2)).replace('"turn/start"', '"turn\\/start"')
    write(path, [event("a", 1)], tail=escaped + "\n")
    journal = JsonlRunJournal(path)
    assert [e.seq for e in await journal.read_range("a", 1, types=["turn/start"])] == [1, 2]
    assert scans == [1]
    assert [e.seq for e in await journal.read_run("a", 1)] == [1, 2]  # no type asked: seeks
    assert scans == [1]

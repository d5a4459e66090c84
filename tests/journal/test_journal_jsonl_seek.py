"""``JsonlRunJournal.read_run`` seeks (``jsonl_scan``): its answer is always the whole-file one.

Every case compares ``read_run`` with the whole file read and filtered (``read_from``), on files
a seek could get wrong: other runs' lines, a torn tail, the run's order broken above the seek
point, and a run directory that no longer describes the file (replaced, truncated, rewritten).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from oma_actors.journal import JournalEvent, JsonlRunJournal, jsonl_scan, to_json_line
from oma_actors.journal.codec import PLAIN_HEAD, peek_run

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
    assert [(seq, jsonl_scan.peek_run(line)) for seq, _, line in lines] == [
        (s, (s, b"b")) for s in range(20, 30)
    ]
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
def test_a_peek_reads_a_run_id_as_spelled_plain_or_escaped(spelled: str) -> None:
    # The plain-run-id fast match must hand an escaped spelling on to the full pattern.
    line = to_json_line(event("a", 7)).replace('"runId":"a"', f'"runId":"{spelled}"').encode()
    assert peek_run(line) == (7, spelled.encode())
    # The tail scan's one match a line: the plain spelling's head, none for an escaped one
    # (whose run is then read from the whole file).
    head = PLAIN_HEAD.match(line)
    if "\\" in spelled:
        assert head is None
    else:
        assert head is not None
        assert head.groups() == (b"turn/start", b"7", spelled.encode())

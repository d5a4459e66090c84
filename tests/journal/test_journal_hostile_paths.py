"""Journals that are not regular files, or too large, are refused before any read (D15, #24.5).

A FIFO given as a journal used to hang the restore (``open`` waits for a writer), ``/dev/zero``
grew it to gigabytes, and ``oma verify`` died with a ``MemoryError`` traceback on a 3 GB file.
Now a journal is opened non-blocking and checked on its descriptor (``S_ISREG``) before one byte
is read or written, and a read refuses a file over ``max_read_bytes`` (1 GiB by default), with a
typed error each time. The CLI prints that error as one line on stderr and exits 2.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from journal_first import finished_run

from oma_actors import StoreError
from oma_actors.errors import CorruptStoreError
from oma_actors.journal import JournalEvent, JsonlRunJournal, to_json_line
from oma_actors.journal.jsonl import MAX_JOURNAL_BYTES

# Every read below must fail fast; a hang is a failure, not a slow pass.
DEADLINE = 20


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    os.mkfifo(path)
    return path


def sparse(tmp_path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk space (``truncate``)."""
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def hostile(tmp_path: Path, kind: str) -> Path:
    if kind == "fifo":
        return fifo(tmp_path)
    if kind == "directory":
        (tmp_path / "dir.jsonl").mkdir()
        return tmp_path / "dir.jsonl"
    if kind == "sparse_3gb":
        return sparse(tmp_path, 3 << 30)
    return Path(kind)  # a device


KINDS = ["fifo", "/dev/zero", "directory", "sparse_3gb"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_read_refuses_what_is_not_a_bounded_regular_file(tmp_path: Path, kind: str) -> None:
    journal = JsonlRunJournal(hostile(tmp_path, kind))
    with pytest.raises(CorruptStoreError) as caught:
        await asyncio.wait_for(journal.read_from(1), DEADLINE)
    expected = "byte limit" if kind == "sparse_3gb" else "not a regular file"
    assert expected in str(caught.value)
    await journal.close()


@pytest.mark.parametrize("kind", ["fifo", "/dev/null", "directory"])
async def test_an_append_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = hostile(tmp_path, kind)
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    event = JournalEvent(
        seq=1, type="turn/start", run_id="r", attempt=1, timestamp_unix_ms=1, data={"turn": 1}
    )
    with pytest.raises(StoreError) as caught:
        await asyncio.wait_for(journal.append([event]), DEADLINE)
    # A directory cannot even be opened for writing; a FIFO or a device can, and is refused
    # on its descriptor before a byte goes to it.
    expected = "Is a directory" if kind == "directory" else "not a regular file"
    assert expected in str(caught.value)
    await journal.close()


async def test_the_read_limit_is_configurable_and_counts_the_whole_file(tmp_path: Path) -> None:
    assert MAX_JOURNAL_BYTES == 1 << 30
    path = tmp_path / "run.jsonl"
    line = to_json_line(
        JournalEvent(
            seq=1, type="turn/start", run_id="r", attempt=1, timestamp_unix_ms=1, data={"turn": 1}
        )
    )
    path.write_text(line + "\n")
    journal = JsonlRunJournal(path)
    assert [e.seq for e in await journal.read_from(1)] == [1]
    journal.max_read_bytes = len(line)  # one byte short of the file (its newline)
    with pytest.raises(CorruptStoreError, match=f"over the {len(line)}-byte limit"):
        await journal.read_from(1)
    journal.max_read_bytes = len(line) + 1
    assert [e.seq for e in await journal.read_from(1)] == [1]


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_oma_verify_refuses_in_one_line_on_stderr(tmp_path: Path, kind: str) -> None:
    done = oma("verify", str(hostile(tmp_path, kind)))
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr  # no traceback
    assert "Traceback" not in done.stderr
    assert "MemoryError" not in done.stderr
    assert "CorruptStoreError" in done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_oma_checkpoint_show_and_runs_show_refuse_in_one_line_on_stderr(
    tmp_path: Path, kind: str
) -> None:
    store_path = tmp_path / "state.json"
    asyncio.run(finished_run(store_path, tmp_path / "run.jsonl", run_id="h1"))
    for command in (
        ("checkpoint", "show", "--store", str(store_path), "--run-id", "h1"),
        ("runs", "show", "h1", "--store", str(store_path)),
    ):
        where = tmp_path / command[0]
        where.mkdir()
        done = oma(*command, "--journal", str(hostile(where, kind)))
        assert done.returncode == 2, done
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert "MemoryError" not in done.stderr

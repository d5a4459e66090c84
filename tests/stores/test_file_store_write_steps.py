"""FileStore's atomic replace, step by step (FS-06, D5), and the guards around its temp file.

A missing fsync changes nothing a test can read back without a power cut, so the first test
watches the calls themselves on the worker thread that writes the file: the temp file's data is
fsynced before the rename, and the folder after it. The others hold the temp file's guards: a
short ``os.write`` is continued, a temp this process is still writing is never swept, and a temp
whose writer is another user's live process is left alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from typing import TYPE_CHECKING

import aiofiles.os

from oma_actors.stores import FileStore
from oma_actors.stores.file_io import sweep_stale_temps, write_atomic

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

OTHER_USERS_PID = 424242  # os.kill answers EPERM for it below: alive, but not ours to signal


async def _read(path: Path) -> bytes:
    return await asyncio.to_thread(path.read_bytes)


async def test_the_temp_file_is_synced_before_the_rename_and_the_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards ``_replace_sync``'s order: fsync(temp) with all its bytes, then ``os.replace``,
    then fsync(folder). Synced after the rename (or not at all), a power cut can leave an empty
    or partial file under the real name; a folder synced before it (or never) can lose the
    rename itself."""
    path = tmp_path / "state.json"
    store = FileStore(path)
    await store.flush()  # loaded and locked: the lock file's steps are not watched below
    calls: list[tuple[str, int | str, int]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            calls.append(("fsync folder", info.st_ino, 0))
        else:
            calls.append(("fsync file", info.st_ino, info.st_size))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append(("replace", os.fspath(dst), 0))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    await store.set("k", "v" * 1000)
    monkeypatch.undo()
    written = await aiofiles.os.stat(path)
    folder = await aiofiles.os.stat(tmp_path)
    assert calls == [
        ("fsync file", written.st_ino, written.st_size),  # the renamed inode, every byte of it
        ("replace", str(path), 0),
        ("fsync folder", folder.st_ino, 0),
    ]
    await store.aclose()


async def test_a_short_write_is_continued_until_every_byte_is_in_the_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the loop over ``os.write`` in ``_replace_sync``: a write may be short (a signal, a
    nearly full disk), and a store that renamed a temp holding only the first chunk would
    replace the state file with a truncated one."""
    path = tmp_path / "state.json"
    store = FileStore(path)
    await store.flush()
    real_write = os.write

    def at_most_64_bytes(fd: int, data: bytes | memoryview) -> int:
        return real_write(fd, bytes(data[:64]))

    monkeypatch.setattr(os, "write", at_most_64_bytes)
    await store.set("k", "x" * 5000)
    monkeypatch.undo()
    document = json.loads(await _read(path))
    assert [(e["key"], e["value"]) for e in document["entries"]] == [("k", "x" * 5000)]
    await store.aclose()


async def test_a_temp_this_process_is_still_writing_is_never_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards ``_writing``: ``write_atomic`` registers its temp before the thread starts, and
    ``sweep_stale_temps`` skips a registered one. The temp carries this process's pid, which
    the sweep otherwise reads as an earlier process that had the same pid: it would delete the
    file mid-write and the rename would fail."""
    path = tmp_path / "state.json"
    in_fsync, go_on = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def held_fsync(fd: int) -> None:  # the temp file's fsync waits until the sweep is done
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            in_fsync.set()
            go_on.wait(timeout=10)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", held_fsync)
    writing = asyncio.ensure_future(write_atomic(str(path), b'{"version":1,"entries":[]}'))
    try:
        assert await asyncio.to_thread(in_fsync.wait, 10)
        temps = [n for n in await aiofiles.os.listdir(tmp_path) if ".tmp-" in n]
        assert temps == [f"state.json.tmp-{os.getpid()}-{temps[0].rsplit('-', 1)[1]}"]
        await sweep_stale_temps(str(path))
        assert await aiofiles.os.listdir(tmp_path) == temps  # still there, still ours
    finally:
        go_on.set()
        await writing  # the rename found its temp
    assert await _read(path) == b'{"version":1,"entries":[]}'
    assert await aiofiles.os.listdir(tmp_path) == ["state.json"]


async def test_a_temp_of_another_users_live_process_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards ``_pid_alive``'s answer to EPERM: ``os.kill(pid, 0)`` refused means a live
    process of another user owns the temp (say, a second account sharing the folder); only a
    pid that is gone (ESRCH) makes a temp stale."""
    path = tmp_path / "state.json"
    live = tmp_path / f"state.json.tmp-{OTHER_USERS_PID}-1"
    await asyncio.to_thread(live.write_bytes, b"being written")
    real_kill = os.kill

    def kill(pid: int, signal: int) -> None:
        if pid == OTHER_USERS_PID:
            raise PermissionError(1, "Operation not permitted")
        real_kill(pid, signal)

    monkeypatch.setattr(os, "kill", kill)
    store = FileStore(path)
    assert await store.list() == []  # the first load sweeps
    assert await aiofiles.os.listdir(tmp_path) == [live.name]
    await store.aclose()

"""FileStore durability: atomic writes, failed flushes, temp files, and OMA byte compatibility."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import aiofiles.os
import pytest

from oma_actors.clock import to_iso
from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.stores import FileStore, file_io
from oma_actors.stores.file_format import decode_store

# The TypeScript OMA fixtures live in shared/, beside the repository (never an absolute path).
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
FIXTURE = SHARED / "fixtures" / "oma" / "task-boundary" / "store.json"
FIXTURE_KEY = "__oma_checkpoint__/fixture-task-boundary/latest"
ISO_MILLIS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
DEAD_PID = 999999


async def _read(path: Path) -> bytes:
    # Test file I/O also stays off the event loop, as a blocking-call detector requires.
    return await asyncio.to_thread(path.read_bytes)


async def _write(path: Path, data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    await asyncio.to_thread(path.write_bytes, raw)


async def _listdir(directory: Path) -> list[str]:
    return sorted(await aiofiles.os.listdir(directory))


async def _exists(path: Path) -> bool:
    return await aiofiles.os.path.exists(path)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _failing_replace(calls: list[str], fail_first: int) -> Any:
    """An ``os.replace`` (a FileStore renames in its worker thread) whose first ``fail_first`` calls fail like a refused rename."""
    real = os.replace

    def replace(src: str, dst: str) -> None:
        if ".tmp-" not in os.fspath(src):  # not a state file's rename: not counted
            real(src, dst)
            return
        calls.append(src)
        if len(calls) <= fail_first:
            raise PermissionError(13, "injected rename failure", dst)
        real(src, dst)

    return replace


async def test_written_bytes_are_compact_oma_json(path: Path) -> None:
    store = FileStore(path)
    await store.set("a", "héllo", {"x": 1, "nested": {"y": [True, None]}})
    await store.set_with_expiry("b", 'quote " and \n', 3)
    data = await _read(path)
    created = [json.loads(data)["entries"][i]["createdAt"] for i in (0, 1)]
    assert all(ISO_MILLIS.fullmatch(stamp) for stamp in created)
    a, b = await store.get("a"), await store.get("b")
    assert a is not None
    assert b is not None
    assert created == [to_iso(a.created_at), to_iso(b.created_at)]
    expected = (
        '{"version":1,"entries":['
        '{"key":"a","value":"héllo","metadata":{"x":1,"nested":{"y":[true,null]}},'
        f'"createdAt":"{created[0]}"}},'
        '{"key":"b","value":"quote \\" and \\n",'
        f'"createdAt":"{created[1]}","expiresAtTurn":3}}'
        "]}"
    ).encode()
    assert data == expected


async def test_lone_surrogate_is_escaped_like_json_stringify(path: Path) -> None:
    await FileStore(path).set("k", "bad \ud800 half")
    assert b'"bad \\ud800 half"' in await _read(path)
    entry = await FileStore(path).get("k")
    assert entry is not None
    assert entry.value == "bad \ud800 half"


async def test_reads_a_file_written_by_typescript_oma(tmp_path: Path) -> None:
    copy = tmp_path / "store.json"
    await asyncio.to_thread(shutil.copyfile, FIXTURE, copy)
    store = FileStore(copy)
    entries = {entry.key: entry for entry in await store.list()}
    assert FIXTURE_KEY in entries
    checkpoint = json.loads(entries[FIXTURE_KEY].value)
    assert checkpoint["version"] == 4
    assert entries[FIXTURE_KEY].created_at.utcoffset() is not None
    # Rewriting after a net no-op change reproduces OMA's bytes exactly: same format, same writer.
    await store.set("probe", "x")
    await store.delete("probe")
    assert await _read(copy) == await _read(FIXTURE)


async def test_stale_temps_of_this_path_are_removed_on_first_load(path: Path) -> None:
    assert not _pid_alive(DEAD_PID)
    directory = path.parent
    stale = [f"state.json.tmp-{DEAD_PID}-1", f"state.json.tmp-{os.getpid()}-987654"]
    kept = [
        f"other.json.tmp-{DEAD_PID}-1",  # another store's file: never ours to touch
        f"state.json.tmp-{os.getppid()}-1",  # a live writer
        f"state.json.tmp-{DEAD_PID}-1.bak",  # not our naming scheme
    ]
    for name in stale + kept:
        await _write(directory / name, "partial")
    store = FileStore(path)
    assert await store.list() == []
    assert await _listdir(directory) == sorted(kept)
    assert not await _exists(path)  # the sweep is not a mutation of the store


@pytest.mark.parametrize("unlock", [False, True])
async def test_failed_flush_fails_its_caller_only(
    path: Path, monkeypatch: pytest.MonkeyPatch, unlock: bool
) -> None:
    store = FileStore(path)
    await store.set("a", "1")
    before = await _read(path)
    calls: list[str] = []
    monkeypatch.setattr(os, "replace", _failing_replace(calls, fail_first=1))
    with pytest.raises(StoreError, match="injected rename failure") as caught:
        await store.set("b", "2")
    assert isinstance(caught.value.__cause__, PermissionError)
    assert await _listdir(path.parent) == [
        "state.json",
        "state.json.lock",
    ]  # the temp file was removed
    assert await _read(path) == before  # the previous revision is intact
    assert await _keys(store) == ["a", "b"]  # FS-08: the mirror already holds "b"
    if unlock:
        # The lock goes back, the mirror (not yet on disk) stays: retaking the lock must not
        # read the file again over "b" (it changed since the mirror was read).
        await store.aclose()
    await store.set("c", "3")
    assert await _keys(FileStore(path)) == ["a", "b", "c"]
    assert sorted(decode_store(str(path), await _read(path))) == ["a", "b", "c"]  # on disk
    assert len(calls) == 2


async def test_failed_flush_does_not_poison_concurrent_writers(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(path)
    await store.list()
    calls: list[str] = []
    monkeypatch.setattr(os, "replace", _failing_replace(calls, fail_first=1))
    results = await asyncio.gather(
        *(store.set(f"k{i}", str(i)) for i in range(5)), return_exceptions=True
    )
    assert isinstance(results[0], StoreError)
    assert results[1:] == [None] * 4
    assert await _keys(FileStore(path)) == [f"k{i}" for i in range(5)]
    assert await _listdir(path.parent) == ["state.json", "state.json.lock"]


async def test_concurrent_writes_share_flushes(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileStore(path)
    await store.list()
    calls: list[str] = []
    monkeypatch.setattr(os, "replace", _failing_replace(calls, fail_first=0))
    await asyncio.gather(*(store.set("k", str(i)) for i in range(100)))
    assert len(calls) < 100  # later flushes found their change already on disk
    entry = await FileStore(path).get("k")
    assert entry is not None
    assert entry.value == "99"  # the last write wins on disk, as in memory


async def test_cas_mismatch_does_not_touch_disk(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(path)
    await store.set("k", "a")
    calls: list[str] = []
    monkeypatch.setattr(os, "replace", _failing_replace(calls, fail_first=99))
    assert await store.compare_and_set("k", "b", "c") is False
    assert await store.compare_and_set("k", None, "c") is False
    assert calls == []
    with pytest.raises(StoreError):
        await store.compare_and_set("k", "a", "c")  # a match does write, and reports failure


async def test_cancelled_caller_does_not_cancel_its_write(path: Path) -> None:
    store = FileStore(path)
    await store.flush()  # loaded and locked: the set below mutates at once, then flushes
    task = asyncio.get_running_loop().create_task(store.set("k", "v"))
    await asyncio.sleep(0)  # let set() mutate the mirror and enqueue its flush
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await store.aclose()
    assert await _keys(FileStore(path)) == ["k"]  # aclose dropped the mirror: read from disk
    assert await _listdir(path.parent) == ["state.json", "state.json.lock"]


async def test_unserializable_metadata_is_rejected_before_the_mirror(path: Path) -> None:
    store = FileStore(path)
    with pytest.raises(StoreError, match="not JSON-serializable"):
        await store.set("k", "v", {"when": object()})
    with pytest.raises(StoreError, match="not JSON-serializable"):
        await store.set("k", "v", {"x": float("nan")})
    assert await store.get("k") is None
    await store.set("ok", "v")
    assert await _keys(FileStore(path)) == ["ok"]


async def test_path_is_resolved_at_construction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await asyncio.to_thread(monkeypatch.chdir, tmp_path)
    # A relative path reads the working directory (a syscall), so build it off the event loop.
    store = await asyncio.to_thread(FileStore, "nested/state.json")
    assert store.path == str(tmp_path / "nested" / "state.json")
    elsewhere = tmp_path / "elsewhere"
    await aiofiles.os.mkdir(elsewhere)
    await asyncio.to_thread(monkeypatch.chdir, elsewhere)
    await store.set("k", "v")  # also creates the missing parent directory
    assert await _exists(tmp_path / "nested" / "state.json")
    assert await _listdir(elsewhere) == []


async def test_clear_always_writes(path: Path) -> None:
    await FileStore(path).clear()
    assert await _read(path) == b'{"version":1,"entries":[]}'


async def _keys(store: FileStore) -> list[str]:
    return [entry.key for entry in await store.list()]


async def test_a_state_file_that_cannot_be_read_is_never_taken_for_a_fresh_one(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read as "no file yet", the next write would replace every entry with the new one alone.
    first = FileStore(str(path))
    await first.set("k", "kept")
    await first.aclose()
    before = await _read(path)

    def disk_error(name: str, limit: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error", name)

    monkeypatch.setattr(file_io, "_read_regular", disk_error)
    store = FileStore(str(path))
    with pytest.raises(CorruptStoreError, match=r"unreadable .*Input/output error.*start fresh"):
        await store.get("k")
    with pytest.raises(CorruptStoreError):
        await store.set("other", "v")
    assert await _read(path) == before
    await store.aclose()

"""FileStore.apply: one atomic rewrite for a whole batch, nothing touched on a mismatch (FS-08/09)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from oma_actors.errors import StoreError
from oma_actors.stores import Expect, FileStore, Put, Remove, Write


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state.json"


def _counting_replace(calls: list[str], fail_first: int = 0) -> Any:
    """An ``os.replace`` (a FileStore renames in its worker thread) that counts renames; the first ``fail_first`` ones fail."""
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


async def _durable(path: Path) -> dict[str, str]:
    # Read the file itself: FileStore(path) would be the live instance, answering from memory.
    data = json.loads(await asyncio.to_thread(path.read_text))
    return {entry["key"]: entry["value"] for entry in data["entries"]}


async def test_a_batch_is_one_rename(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileStore(path)
    await store.set("gone", "x")
    calls: list[str] = []
    monkeypatch.setattr(os, "replace", _counting_replace(calls))
    batch: list[Write] = [Put("a", "1"), Put("b", "2", {"m": 1}), Remove("gone"), Put("c", "3")]
    assert await store.apply([Expect("gone", "x"), Expect("a", None)], batch)
    assert len(calls) == 1
    assert await _durable(path) == {"a": "1", "b": "2", "c": "3"}


async def test_a_mismatch_touches_neither_the_file_nor_the_mirror(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(path)
    await store.set("fence", "2")
    before = await store.list()
    calls: list[str] = []
    monkeypatch.setattr(os, "replace", _counting_replace(calls, fail_first=99))
    assert not await store.apply([Expect("fence", "1")], [Put("snap", "stale"), Remove("fence")])
    assert calls == []
    assert await store.list() == before


async def test_unencodable_metadata_anywhere_in_a_batch_changes_nothing(path: Path) -> None:
    store = FileStore(path)
    await store.set("a", "1")
    batch = [Put("a", "2"), Put("b", "v", {"when": object()})]
    with pytest.raises(StoreError, match="not JSON-serializable"):
        await store.apply([], batch)
    assert [(e.key, e.value) for e in await store.list()] == [("a", "1")]
    assert await _durable(path) == {"a": "1"}
    assert await store.apply([Expect("a", "1")], [Put("b", "ok")])  # the store still works


async def test_a_failed_write_is_reported_like_a_failed_set(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FS-08: the caller gets the error; the mirror keeps the batch and the next write persists it.
    store = FileStore(path)
    await store.set("fence", "1")
    calls: list[str] = []
    monkeypatch.setattr(os, "replace", _counting_replace(calls, fail_first=1))
    with pytest.raises(StoreError, match="injected rename failure"):
        await store.apply([Expect("fence", "1")], [Put("fence", "2"), Put("snap", "s2")])
    assert await _durable(path) == {"fence": "1"}  # the previous revision is intact
    assert await store.apply([Expect("fence", "2")], [])  # the mirror holds the batch ...
    assert await _durable(path) == {"fence": "2", "snap": "s2"}  # ... and now so does the disk


async def test_a_no_op_apply_returns_only_once_what_it_checked_is_durable(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(path)
    await store.set("fence", "1")
    calls: list[str] = []
    monkeypatch.setattr(os, "replace", _counting_replace(calls, fail_first=1))
    with pytest.raises(StoreError):
        await store.set("fence", "2")  # in the mirror, not on disk
    assert await store.apply([Expect("fence", "2")], [Remove("missing")])
    assert await _durable(path) == {"fence": "2"}
    assert len(calls) == 2
    assert await store.apply([Expect("fence", "2")], [])  # nothing pending: no rewrite
    assert len(calls) == 2


async def test_concurrent_fenced_batches_persist_one_winner(path: Path) -> None:
    async with FileStore.open(path) as store:
        await store.set("fence", "0")
        results = await asyncio.gather(
            *(
                store.apply([Expect("fence", "0")], [Put("fence", str(i)), Put("snap", str(i))])
                for i in range(1, 9)
            )
        )
    assert sum(results) == 1
    durable = await _durable(path)
    assert durable["fence"] == durable["snap"] == str(results.index(True) + 1)


async def test_compare_and_set_is_an_apply(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileStore(path)
    seen: list[tuple[Any, Any]] = []
    real = FileStore.apply

    async def spy(self: FileStore, checks: Any, writes: Any) -> bool:
        seen.append((list(checks), list(writes)))
        return await real(self, checks, writes)

    monkeypatch.setattr(FileStore, "apply", spy)
    assert await store.compare_and_set("k", None, "v", {"m": 1})
    assert seen == [([Expect("k", None)], [Put("k", "v", {"m": 1})])]

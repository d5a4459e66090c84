"""FileStore: OMA's file-store.test.ts (T-54..T-68) plus durability edges of our own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiofiles.os
import pytest

from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.stores import FileStore

VALID_CREATED_AT = "2026-01-02T03:04:05.678Z"


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


async def _write_json(path: Path, document: object) -> None:
    await _write(path, json.dumps(document))


def _store_file(*entries: object) -> dict[str, Any]:
    return {"version": 1, "entries": list(entries)}


def _entry(**overrides: Any) -> dict[str, Any]:
    return {"key": "k", "value": "v", "createdAt": VALID_CREATED_AT, **overrides}


async def _keys(store: FileStore) -> list[str]:
    return [entry.key for entry in await store.list()]


# --- T-54..T-64: behaviour and persistence ---------------------------------------------------


async def test_t54_get_set_list_delete_clear(path: Path) -> None:
    store = FileStore(path)
    assert await store.get("missing") is None
    assert await store.list() == []
    await store.set("a", "1", {"agent": "x"})
    await store.set("b", "2")
    a = await store.get("a")
    assert a is not None
    assert (a.value, a.metadata) == ("1", {"agent": "x"})
    assert a.created_at.utcoffset() is not None
    assert await _keys(store) == ["a", "b"]
    await store.delete("a")
    assert await store.get("a") is None
    assert await _keys(store) == ["b"]
    await store.clear()
    assert await store.list() == []


async def test_t55_caller_metadata_mutation_does_not_leak(path: Path) -> None:
    store = FileStore(path)
    metadata: dict[str, Any] = {"a": 1}
    await store.set("k", "v", metadata)
    metadata["a"] = 2
    entry = await store.get("k")
    assert entry is not None
    assert entry.metadata == {"a": 1}
    reloaded = await FileStore(path).get("k")
    assert reloaded is not None
    assert reloaded.metadata == {"a": 1}


async def test_t56_new_instance_reads_what_writer_wrote(path: Path) -> None:
    await FileStore(path).set("k", "value", {"agent": "w", "n": 2})
    entry = await FileStore(path).get("k")
    assert entry is not None
    assert (entry.value, entry.metadata) == ("value", {"agent": "w", "n": 2})


async def test_t57_created_at_kept_on_update_and_reload(path: Path) -> None:
    store = FileStore(path)
    await store.set("k", "v1")
    first = await store.get("k")
    await asyncio.sleep(0.01)
    await store.set("k", "v2")
    second = await store.get("k")
    reloaded = await FileStore(path).get("k")
    assert first is not None
    assert second is not None
    assert reloaded is not None
    assert second.created_at == first.created_at
    assert (reloaded.value, reloaded.created_at) == ("v2", first.created_at)


async def test_t58_expiry_survives_reload(path: Path) -> None:
    await FileStore(path).set_with_expiry("k", "ttl", 7, {"a": 1})
    entry = await FileStore(path).get("k")
    assert entry is not None
    assert (entry.value, entry.expires_at_turn, entry.metadata) == ("ttl", 7, {"a": 1})


async def test_t59_delete_and_clear_are_persisted(path: Path) -> None:
    store = FileStore(path)
    for key in ("a", "b", "c"):
        await store.set(key, key)
    await store.delete("a")
    assert await _keys(FileStore(path)) == ["b", "c"]
    await store.clear()
    assert await FileStore(path).list() == []


async def test_t60_concurrent_sets_are_all_persisted(path: Path) -> None:
    store = FileStore(path)
    await asyncio.gather(*(store.set(f"k{i}", str(i)) for i in range(25)))
    assert await _keys(FileStore(path)) == [f"k{i}" for i in range(25)]


async def test_t61_concurrent_cas_has_one_persisted_winner(path: Path) -> None:
    store = FileStore(path)
    await store.set("approval", "pending")
    results = await asyncio.gather(
        store.compare_and_set("approval", "pending", "approved"),
        store.compare_and_set("approval", "pending", "rejected"),
    )
    assert sorted(results) == [False, True]
    winner = "approved" if results[0] else "rejected"
    stored, fresh = await store.get("approval"), await FileStore(path).get("approval")
    assert stored is not None
    assert fresh is not None
    assert stored.value == fresh.value == winner


async def test_t62_no_temp_files_after_concurrent_writes(path: Path) -> None:
    store = FileStore(path)
    await asyncio.gather(*(store.set(f"k{i % 3}", str(i)) for i in range(30)))
    await asyncio.gather(*(store.compare_and_set("k0", None, "x") for _ in range(5)))
    # The lock file stays (deleting it would let two processes lock two inodes under one name).
    assert await _listdir(path.parent) == ["state.json", "state.json.lock"]


async def test_t63_file_is_oma_json(path: Path) -> None:
    await FileStore(path).set("k", "v")
    document = json.loads(await _read(path))
    assert document["version"] == 1
    assert isinstance(document["entries"], list)
    (entry,) = document["entries"]
    assert set(entry) == {"key", "value", "createdAt"}
    assert (entry["key"], entry["value"]) == ("k", "v")
    assert isinstance(entry["createdAt"], str)


async def test_t64_missing_file_is_empty_and_not_created(path: Path) -> None:
    store = FileStore(path)
    assert await store.list() == []
    assert await store.get("k") is None
    await store.delete("k")  # removes nothing, so writes nothing (FS-10)
    await store.flush()
    assert not await _exists(path)


# --- T-65..T-68 and the rest of FS-04: corrupt files raise, never start empty ---------------


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"version":1,"entries":[', b"", b'{"version":NaN,"entries":[]}', b"\xff\xfe"],
    ids=["garbage", "truncated", "empty", "nan-literal", "not-utf8"],
)
async def test_t65_corrupt_json_raises(path: Path, content: bytes) -> None:
    await _write(path, content)
    with pytest.raises(CorruptStoreError, match="not valid JSON") as caught:
        await FileStore(path).list()
    assert caught.value.path == str(path)
    assert await _read(path) == content


@pytest.mark.parametrize("version", [999, "1", True, None, 2.5])
async def test_t66_unsupported_version_raises(path: Path, version: object) -> None:
    await _write_json(path, {"version": version, "entries": []})
    with pytest.raises(CorruptStoreError, match=r"unsupported state file version .*\(expected 1\)"):
        await FileStore(path).list()


@pytest.mark.parametrize(
    "entry",
    [
        {"key": "k", "createdAt": VALID_CREATED_AT},
        {"key": "k", "value": "v"},
        {"value": "v", "createdAt": VALID_CREATED_AT},
        _entry(value=1),
        "not an object",
        None,
    ],
    ids=["no-value", "no-createdAt", "no-key", "numeric-value", "string", "null"],
)
async def test_t67_malformed_entry_raises(path: Path, entry: object) -> None:
    await _write_json(path, _store_file(_entry(key="ok"), entry))
    with pytest.raises(CorruptStoreError, match="malformed entry"):
        await FileStore(path).list()


@pytest.mark.parametrize("metadata", [None, "string", [1, 2], 3])
async def test_t68_non_object_metadata_raises(path: Path, metadata: object) -> None:
    await _write_json(path, _store_file(_entry(metadata=metadata)))
    with pytest.raises(CorruptStoreError, match="non-object metadata"):
        await FileStore(path).get("k")


@pytest.mark.parametrize("document", [[], "text", 1, None], ids=["array", "string", "num", "null"])
async def test_top_level_not_an_object_raises(path: Path, document: object) -> None:
    await _write_json(path, document)
    with pytest.raises(CorruptStoreError, match="not a store object"):
        await FileStore(path).list()


@pytest.mark.parametrize("entries", [None, {}, "[]"], ids=["missing", "object", "string"])
async def test_missing_entries_array_raises(path: Path, entries: object) -> None:
    document: dict[str, object] = {"version": 1}
    if entries is not None:
        document["entries"] = entries
    await _write_json(path, document)
    with pytest.raises(CorruptStoreError, match='has no "entries" array'):
        await FileStore(path).list()


async def test_invalid_created_at_raises(path: Path) -> None:
    await _write_json(path, _store_file(_entry(createdAt="yesterday")))
    with pytest.raises(CorruptStoreError, match="invalid createdAt"):
        await FileStore(path).list()


@pytest.mark.parametrize(
    ("raw", "loaded"), [("7", None), (None, None), (True, None), (7.5, None), (7.0, 7), (3, 3)]
)
async def test_expires_at_turn_non_number_is_dropped(
    path: Path, raw: object, loaded: int | None
) -> None:
    await _write_json(path, _store_file(_entry(expiresAtTurn=raw)))
    entry = await FileStore(path).get("k")
    assert entry is not None
    assert entry.expires_at_turn == loaded


async def test_failed_load_is_memoized_per_instance(path: Path) -> None:
    await _write(path, "{oops")
    store = FileStore(path)
    with pytest.raises(CorruptStoreError) as first:
        await store.list()
    await _write_json(path, _store_file(_entry()))  # repaired on disk
    with pytest.raises(CorruptStoreError) as again:
        await store.get("k")
    with pytest.raises(CorruptStoreError) as on_write:
        await store.set("other", "v")
    assert again.value is first.value
    assert on_write.value is first.value
    assert await _keys(FileStore(path)) == ["k"]  # a new instance re-reads


async def test_unreadable_path_is_an_error_not_empty(tmp_path: Path) -> None:
    await aiofiles.os.mkdir(tmp_path / "dir.json")
    with pytest.raises(CorruptStoreError, match="unreadable"):
        await FileStore(tmp_path / "dir.json").list()
    await _write(tmp_path / "plain", "x")
    with pytest.raises(StoreError):
        await FileStore(tmp_path / "plain" / "state.json").list()


async def test_open_loads_eagerly_and_drains_on_exit(path: Path) -> None:
    async with FileStore.open(path) as store:
        await store.set("k", "v")
    assert await _keys(FileStore(path)) == ["k"]
    await _write(path, "[]")
    with pytest.raises(CorruptStoreError, match="not a store object"):
        async with FileStore.open(path):
            pytest.fail("open() must raise before yielding a corrupt store")

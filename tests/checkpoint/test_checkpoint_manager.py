"""``Checkpoint``: keys, save/load/delete through any store (spec CK-01..CK-05, T-04)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from checkpoint_support import CREATED_AT, IDENTITY, make_snapshot, task_state

from oma_actors.checkpoint import (
    CHECKPOINT_KEY_PREFIX,
    DEFAULT_CHECKPOINT_KEY,
    Checkpoint,
    checkpoint_key,
    decode,
    is_checkpoint_key,
)
from oma_actors.errors import CheckpointError, StoreError, UnsupportedSchemaError
from oma_actors.stores.file import FileStore
from oma_actors.stores.memory import InMemoryStore
from oma_actors.testing import FailingStore, MinimalStore


def unreadable_store() -> FailingStore:
    """A user store whose every read fails, as a dropped database connection does."""
    return FailingStore(
        MinimalStore(),
        op="get",
        prefix="",
        times=None,
        exc_factory=lambda: ConnectionError("redis: connection reset by peer"),
    )


# -- keys (CK-01) ------------------------------------------------------------------------------


def test_key_constants() -> None:
    assert CHECKPOINT_KEY_PREFIX == "__oma_checkpoint__/"
    assert DEFAULT_CHECKPOINT_KEY == "__oma_checkpoint__/latest"


@pytest.mark.parametrize(
    ("run_id", "key"),
    [
        (None, "__oma_checkpoint__/latest"),
        ("", "__oma_checkpoint__/latest"),
        ("x", "__oma_checkpoint__/x/latest"),
        ("run-2025/a", "__oma_checkpoint__/run-2025/a/latest"),
    ],
)
def test_checkpoint_key(run_id: str | None, key: str) -> None:
    assert checkpoint_key(run_id) == key
    assert is_checkpoint_key(key)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("__oma_checkpoint__/latest", True),
        ("__oma_checkpoint__/custom/latest", True),
        ("__oma_checkpoint__/", True),
        ("__oma_checkpoint__", False),
        ("__oma_approval__/apr_0123", False),
        ("worker/__oma_checkpoint__/latest", False),
        ("", False),
    ],
)
def test_is_checkpoint_key(key: str, expected: bool) -> None:
    assert is_checkpoint_key(key) is expected


def test_manager_key_choice() -> None:
    store = InMemoryStore()
    assert Checkpoint(store).key == DEFAULT_CHECKPOINT_KEY
    assert Checkpoint(store, run_id="custom").key == "__oma_checkpoint__/custom/latest"
    assert Checkpoint(store, key="my/key", run_id="custom").key == "my/key"  # CK-02


# -- save / load / delete (CK-03..CK-05, T-04) -------------------------------------------------


async def test_t04_save_writes_only_the_run_key_with_metadata() -> None:
    store = MinimalStore()  # a user-written store: the five required methods only
    snapshot = make_snapshot(identity=replace(IDENTITY, run_id="custom"))
    assert snapshot.run_id == "custom"
    checkpoint = Checkpoint(store, run_id="custom")
    text = await checkpoint.save(snapshot)
    assert [entry.key for entry in await store.list()] == ["__oma_checkpoint__/custom/latest"]
    (write,) = store.writes
    key, value, metadata = write.key, write.value, write.metadata
    assert key == "__oma_checkpoint__/custom/latest"
    assert value == text
    assert metadata == {
        "namespace": "checkpoint",
        "version": 4,
        "runId": "custom",
        "createdAt": CREATED_AT,
    }
    assert json.loads(text)["version"] == 4
    loaded = await checkpoint.load_latest()
    assert loaded is not None
    assert [task.id for task in loaded.tasks if task.status == "completed"] == ["a"]
    assert loaded.raw["queue"]["completed"] == ["a"]
    assert loaded == snapshot


async def test_save_replaces_the_latest_snapshot() -> None:
    store = MinimalStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    await checkpoint.save(make_snapshot(revision=1))
    await checkpoint.save(make_snapshot(revision=2, goal="second"))
    assert len(await store.list()) == 1
    loaded = await checkpoint.load_latest()
    assert loaded is not None
    assert (loaded.revision, loaded.goal) == (2, "second")


async def test_load_latest_of_a_missing_key_is_none() -> None:
    store = InMemoryStore()
    await store.set("__oma_checkpoint__/other/latest", "{}")
    assert await Checkpoint(store, run_id="custom").load_latest() is None
    assert await Checkpoint(store).load_latest() is None


async def test_delete_removes_only_the_key() -> None:
    store = InMemoryStore()
    await store.set("researcher/note", "keep me")
    checkpoint = Checkpoint(store, run_id="custom")
    await checkpoint.save(make_snapshot())
    await checkpoint.delete()
    assert await checkpoint.load_latest() is None
    assert [entry.key for entry in await store.list()] == ["researcher/note"]
    await checkpoint.delete()  # deleting again is harmless


async def test_explicit_key_wins_over_run_id() -> None:
    store = MinimalStore()
    checkpoint = Checkpoint(store, run_id="custom", key="team/checkpoints/nightly")
    await checkpoint.save(make_snapshot())
    assert [entry.key for entry in await store.list()] == ["team/checkpoints/nightly"]
    assert await Checkpoint(store, run_id="custom").load_latest() is None
    assert await Checkpoint(store, key="team/checkpoints/nightly").load_latest() is not None


async def test_a_failed_read_is_a_store_error_never_none() -> None:
    checkpoint = Checkpoint(unreadable_store(), run_id="custom")
    with pytest.raises(StoreError) as info:
        await checkpoint.load_latest()
    assert "__oma_checkpoint__/custom/latest" in str(info.value)
    assert "connection reset by peer" in str(info.value)
    assert isinstance(info.value.__cause__, ConnectionError)


async def test_a_store_error_on_read_is_passed_on_as_the_store_raised_it() -> None:
    # Already typed and named by the store: passed on, not wrapped a second time.
    failing = FailingStore(
        MinimalStore(), op="get", prefix="", times=None,
        exc_factory=lambda: StoreError("sqlite:///runs.db: database is locked"),
    )  # fmt: skip
    with pytest.raises(StoreError) as info:
        await Checkpoint(failing, run_id="custom").load_latest()
    assert str(info.value) == "sqlite:///runs.db: database is locked"


async def test_a_corrupt_value_is_an_error_never_none() -> None:
    store = InMemoryStore()
    key = checkpoint_key("custom")
    await store.set(key, '{"version": 4, "mode": "runTasks"')  # torn write
    with pytest.raises(CheckpointError) as info:
        await Checkpoint(store, run_id="custom").load_latest()
    assert str(info.value) == f'Checkpoint: stored value at "{key}" is not valid JSON.'

    await store.set(key, json.dumps({"version": 4, "mode": "runTasks"}))
    with pytest.raises(CheckpointError) as info:
        await Checkpoint(store, run_id="custom").load_latest()
    assert f'Checkpoint: stored value at "{key}" is not a checkpoint snapshot' in str(info.value)

    await store.set(key, json.dumps({"version": 9}))
    with pytest.raises(UnsupportedSchemaError):
        await Checkpoint(store, run_id="custom").load_latest()


async def test_round_trip_through_a_file_store(tmp_path: Path) -> None:
    path = tmp_path / "state" / "store.json"
    snapshot = make_snapshot(goal="durable", revision=4)
    async with FileStore.open(path) as store:
        await Checkpoint(store, run_id="run-test").save(snapshot)
    async with FileStore.open(path) as reopened:
        loaded = await Checkpoint(reopened, run_id="run-test").load_latest()
    assert loaded == snapshot
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    (entry,) = on_disk["entries"]
    assert entry["key"] == "__oma_checkpoint__/run-test/latest"
    assert entry["metadata"]["namespace"] == "checkpoint"
    assert decode(entry["value"], key=entry["key"]) == snapshot


def test_task_state_helper_is_millisecond_exact() -> None:
    """The builders above rely on timestamps that survive ``toISOString`` precision."""
    task = task_state("a", "pending")
    assert task.created_at.microsecond % 1000 == 0
    assert task.updated_at.microsecond % 1000 == 0

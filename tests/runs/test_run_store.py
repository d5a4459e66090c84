"""RS-03 (the RunStore seam) and RS-04 (MemoryStoreRunStore), over InMemoryStore and FileStore."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from run_helpers import code_of, code_of_call, record

from oma_actors.errors import LeaseError
from oma_actors.keyspace import run_record_key
from oma_actors.runs import MemoryStoreRunStore, RunRecord, RunStore, is_run_record_key
from oma_actors.stores import FileStore, InMemoryStore, SqliteStore
from oma_actors.stores.base import ConditionalStore
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import KeyRing
from oma_actors.testing import ForwardingStore, MinimalStore

KEY = bytes(range(32))


def bump(current: RunRecord, **changes: Any) -> RunRecord:
    return replace(current, version=current.version + 1, **changes)


async def test_it_is_a_run_store_that_says_its_atomicity(store: ConditionalStore) -> None:
    run_store = MemoryStoreRunStore(store)
    assert isinstance(run_store, RunStore)
    assert run_store.atomicity == "process"
    assert code_of_call(MemoryStoreRunStore, store, atomicity="global") == "RUN_VALIDATION_ERROR"


async def test_an_embedded_store_cannot_claim_cross_process_atomicity(
    store: ConditionalStore,
) -> None:
    claim = code_of_call(MemoryStoreRunStore, store, atomicity="cross-process")
    assert claim == "RUN_VALIDATION_ERROR"
    # A wrapper over one serialises no more than the store it wraps (before, it was taken at
    # its word: two workers could both own a run behind an EncryptingStore over a FileStore).
    for wrapper in (
        ForwardingStore(store),
        EncryptingStore(store, KeyRing({"k": KEY}, active="k")),
    ):
        with pytest.raises(LeaseError, match=f"a {type(store).__name__} cannot be declared"):
            MemoryStoreRunStore(wrapper, atomicity="cross-process")


async def test_a_database_store_is_taken_at_its_word(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "runs.db") as database:
        claimed = MemoryStoreRunStore(ForwardingStore(database), atomicity="cross-process")
        assert claimed.atomicity == "cross-process"


def test_a_store_without_compare_and_set_is_refused() -> None:
    assert code_of_call(MemoryStoreRunStore, MinimalStore()) == "RUN_STORE_ATOMIC_REQUIRED"


async def test_create_inserts_once_and_tells_the_loser(store: ConditionalStore) -> None:
    run_store = MemoryStoreRunStore(store)
    assert await run_store.get("run-1") is None
    assert await run_store.create(record())
    assert not await run_store.create(record(attempt=2))
    stored = await run_store.get("run-1")
    assert stored == record()
    entry = await store.get(run_record_key("run-1"))
    assert entry is not None
    assert entry.value == record().to_json()
    assert entry.metadata == {
        "namespace": "run", "schema": 1, "runId": "run-1", "version": 1, "status": "running",
        "attempt": 1, "fencingToken": 1, "updatedAt": "2026-09-01T00:00:00.000Z",
    }  # fmt: skip


async def test_create_must_start_at_version_one(store: ConditionalStore) -> None:
    assert await code_of(MemoryStoreRunStore(store).create(record(version=2))) == (
        "RUN_VALIDATION_ERROR"
    )
    assert await store.get(run_record_key("run-1")) is None


async def test_compare_and_set_swaps_only_at_the_expected_version(store: ConditionalStore) -> None:
    run_store = MemoryStoreRunStore(store)
    await run_store.create(record())
    current = record()
    assert await run_store.compare_and_set("run-1", 1, bump(current, status="suspended"))
    assert not await run_store.compare_and_set("run-1", 1, bump(current, status="completed"))
    stored = await run_store.get("run-1")
    assert stored is not None
    assert (stored.version, stored.status) == (2, "suspended")


async def test_compare_and_set_on_a_missing_record_fails_without_creating(
    store: ConditionalStore,
) -> None:
    run_store = MemoryStoreRunStore(store)
    assert not await run_store.compare_and_set("absent", 1, record(run_id="absent", version=2))
    assert await run_store.get("absent") is None


async def test_a_write_must_follow_the_expected_version_and_run(store: ConditionalStore) -> None:
    run_store = MemoryStoreRunStore(store)
    await run_store.create(record())
    skipped = run_store.compare_and_set("run-1", 1, record(version=5))
    assert await code_of(skipped) == "RUN_VALIDATION_ERROR"
    other = run_store.compare_and_set("run-1", 1, record(run_id="other", version=2))
    assert await code_of(other) == "RUN_VALIDATION_ERROR"
    assert await run_store.get("run-1") == record()


async def test_two_concurrent_swaps_have_one_winner(store: ConditionalStore) -> None:
    run_store = MemoryStoreRunStore(store)
    await run_store.create(record())
    results = await asyncio.gather(
        run_store.compare_and_set("run-1", 1, bump(record(), status="completed")),
        run_store.compare_and_set("run-1", 1, bump(record(), status="failed")),
    )
    assert sorted(results) == [False, True]
    stored = await run_store.get("run-1")
    assert stored is not None
    assert stored.version == 2


async def test_a_corrupt_or_misfiled_record_raises_rather_than_reads_as_absent(
    store: ConditionalStore,
) -> None:
    run_store = MemoryStoreRunStore(store)
    await store.set(run_record_key("run-1"), "not json")
    assert await code_of(run_store.get("run-1")) == "RUN_INTEGRITY_ERROR"
    assert not await run_store.create(record())
    await store.set(run_record_key("run-2"), record(run_id="other").to_json())
    assert await code_of(run_store.get("run-2")) == "RUN_INTEGRITY_ERROR"
    # Nothing was overwritten on the error paths.
    assert (await store.get(run_record_key("run-1"))).value == "not json"  # type: ignore[union-attr]


async def test_a_swap_compares_the_exact_stored_text(store: ConditionalStore) -> None:
    """A write between our read and our swap, even at the same version, makes the swap fail."""
    run_store = MemoryStoreRunStore(store)
    await run_store.create(record())
    original = store.get

    async def get_then_sneak_in(key: str):  # type: ignore[no-untyped-def]
        entry = await original(key)
        await store.set(key, record(attempt=7).to_json())  # same version 1, other content
        return entry

    store.get = get_then_sneak_in  # type: ignore[method-assign]
    assert not await run_store.compare_and_set("run-1", 1, bump(record()))
    store.get = original  # type: ignore[method-assign]
    stored = await run_store.get("run-1")
    assert stored is not None
    assert stored.attempt == 7


async def test_delete_removes_the_record(store: ConditionalStore) -> None:
    run_store = MemoryStoreRunStore(store)
    await run_store.create(record())
    await run_store.delete("run-1")
    assert await run_store.get("run-1") is None
    assert is_run_record_key(run_record_key("run-1"))
    assert not is_run_record_key("__oma_checkpoint__/run-1/latest")


async def test_a_record_written_through_one_file_store_is_read_through_another(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.json"
    async with FileStore.open(path) as first:
        assert await MemoryStoreRunStore(first).create(record())
    async with FileStore.open(path) as second:
        assert await MemoryStoreRunStore(second).get("run-1") == record()


async def test_the_error_carries_no_record_for_a_validation_problem() -> None:
    with pytest.raises(LeaseError) as caught:
        await MemoryStoreRunStore(InMemoryStore()).create(record(version=3))
    assert caught.value.record is None

"""The test kit's store fakes and fault wrappers do what their docstrings say.

That they are real stores is checked by the contract (tests/stores/test_contract.py); here is
what they add: recording, pausing, meeting, and faults on ``apply``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from oma_actors.keyspace import checkpoint_key, run_record_key
from oma_actors.stores import (
    Expect,
    FileStore,
    InMemoryStore,
    Put,
    Remove,
    is_atomic_store,
    is_conditional_store,
)
from oma_actors.testing import (
    FailingStore,
    ForwardingStore,
    MinimalStore,
    RecordingStore,
    RendezvousStore,
    StoreCall,
    UnknownOutcomeStore,
)

SNAPSHOT = checkpoint_key("r1")
FENCE = run_record_key("r1")


async def test_minimal_store_has_only_the_required_methods_and_records_calls() -> None:
    store = MinimalStore()
    assert not is_atomic_store(store)
    assert not hasattr(store, "set_with_expiry")
    metadata = {"m": 1}
    await store.set("k", "v", metadata)
    await store.get("k")
    await store.list()
    await store.delete("k")
    await store.clear()
    assert [call.op for call in store.calls] == ["set", "get", "list", "delete", "clear"]
    assert store.writes == [StoreCall("set", "k", "v", metadata)]
    assert store.writes[0].metadata is metadata


def test_wrappers_have_exactly_the_inner_capabilities() -> None:
    for wrap in (ForwardingStore, RecordingStore, RendezvousStore):
        assert is_conditional_store(wrap(InMemoryStore()))
        plain = wrap(MinimalStore())
        assert not is_atomic_store(plain)
        assert not hasattr(plain, "apply")
        assert not hasattr(plain, "set_with_expiry")
    assert "MinimalStore" in repr(ForwardingStore(MinimalStore()))


async def test_recording_store_records_only_what_landed(tmp_path: Path) -> None:
    store = RecordingStore(FileStore(tmp_path / "state.json"))
    await store.set(SNAPSHOT, "s1")
    await store.set_with_expiry("note", "n", 3)
    assert not await store.compare_and_set(FENCE, "stale", "x")
    assert await store.compare_and_set(FENCE, None, "1")
    assert not await store.apply([Expect(FENCE, "0")], [Put(SNAPSHOT, "lost")])
    assert await store.apply([Expect(FENCE, "1")], [Put(SNAPSHOT, "s2"), Remove("note")])
    await store.delete(SNAPSHOT)
    assert store.attempts == 6
    assert [(c.op, c.key, c.value) for c in store.writes] == [
        ("set", SNAPSHOT, "s1"),
        ("set_with_expiry", "note", "n"),
        ("compare_and_set", FENCE, "1"),
        ("apply", SNAPSHOT, "s2"),
        ("apply", "note", None),
    ]
    assert store.values(SNAPSHOT) == ["s1", "s2"]


async def test_recording_store_pause_lets_a_later_write_overtake() -> None:
    class SlowFirst(RecordingStore):
        async def pause(self, call: StoreCall) -> None:
            if call.value == "first":
                await asyncio.sleep(0.05)

    store = SlowFirst(InMemoryStore())
    await asyncio.gather(store.set("k", "first"), store.set("k", "second"))
    assert store.values() == ["second", "first"]
    assert store.max_in_flight == 2
    assert store.in_flight == 0


async def test_rendezvous_store_holds_reads_until_the_parties_meet() -> None:
    store = RendezvousStore(InMemoryStore(), parties=3)
    await store.set("k", "v")
    assert (await store.get("k")) is not None  # unarmed: straight through
    store.armed = True
    first = asyncio.ensure_future(store.get("k"))
    second = asyncio.ensure_future(store.get("k"))
    await asyncio.sleep(0.01)
    assert not first.done()
    assert not second.done()
    await store.set("k", "changed")  # the waiting reads already hold the old entry
    third = await store.get("k")
    entries = [await first, await second, third]
    assert [entry.value for entry in entries if entry] == ["v", "v", "changed"]
    assert (await store.get("k")) is not None  # after the meeting: straight through
    with pytest.raises(ValueError, match="parties"):
        RendezvousStore(InMemoryStore(), parties=1)


async def test_failing_store_fails_a_watched_apply_before_anything_lands() -> None:
    inner = InMemoryStore()
    store = FailingStore(inner, op="apply", exc_factory=lambda: OSError("disk full"))
    assert await store.apply([], [Put("elsewhere", "x")])  # no write under the prefix
    with pytest.raises(OSError, match="disk full"):
        await store.apply([Expect(FENCE, None)], [Put(FENCE, "1"), Put(SNAPSHOT, "s")])
    assert (store.matched, store.fired) == (1, 1)
    assert await inner.get(SNAPSHOT) is None
    assert await inner.get(FENCE) is None  # the whole batch, not only the watched write
    assert await store.apply([], [Remove(SNAPSHOT)])  # times=1: the next one passes
    assert store.matched == 2


async def test_unknown_outcome_of_a_landed_apply() -> None:
    inner = InMemoryStore()
    store = UnknownOutcomeStore(inner, landed=True, op="apply", predicate=lambda k, v: v == 2)
    assert await store.apply([], [Put(SNAPSHOT, "1")])
    with pytest.raises(TimeoutError, match="landed"):
        await store.apply([], [Put(SNAPSHOT, "2")])
    entry = await inner.get(SNAPSHOT)
    assert entry is not None
    assert entry.value == "2"

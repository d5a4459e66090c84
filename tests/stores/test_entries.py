"""Entry semantics, once for every backend (stores/entries.py), driven by a FakeClock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from oma_actors.stores import Expect, FileStore, InMemoryStore, MemoryEntry, Put, Remove, Write
from oma_actors.stores.entries import checks_hold, commit, make_entry, plan_writes
from oma_actors.testing import FakeClock

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def _entry(key: str, value: str) -> MemoryEntry:
    return MemoryEntry(key=key, value=value, metadata=None, created_at=T0)


# -- the pure helpers --------------------------------------------------------------------------


def test_make_entry_keeps_created_at_copies_metadata_and_sets_expiry() -> None:
    metadata = {"m": 1}
    fresh = make_entry(None, "k", "v", metadata, now=T0, expires_at_turn=4)
    metadata["m"] = 2
    assert (fresh.created_at, fresh.metadata, fresh.expires_at_turn) == (T0, {"m": 1}, 4)
    again = make_entry(fresh, "k", "v2", None, now=T1)
    assert (again.value, again.created_at, again.metadata, again.expires_at_turn) == (
        "v2",
        T0,
        None,
        None,
    )


def test_checks_hold_compares_values_and_absence() -> None:
    entries = {"a": _entry("a", "1"), "e": _entry("e", "")}
    assert checks_hold(entries, [Expect("a", "1"), Expect("x", None), Expect("e", "")])
    assert not checks_hold(entries, [Expect("a", "1"), Expect("a", "2")])
    assert not checks_hold(entries, [Expect("x", "")])
    assert not checks_hold(entries, [Expect("e", None)])
    assert checks_hold(entries, [])


def test_plan_writes_does_not_touch_the_entries_and_sees_earlier_writes() -> None:
    entries = {"a": _entry("a", "1"), "b": _entry("b", "2")}
    snapshot = dict(entries)
    writes: list[Write] = [
        Remove("a"),
        Put("a", "new"),
        Put("b", "2b"),
        Remove("missing"),
        Put("c", "3"),
    ]
    changes = plan_writes(entries, writes, now=T1)
    assert entries == snapshot
    assert [(key, entry.value if entry else None) for key, entry in changes] == [
        ("a", None),
        ("a", "new"),
        ("b", "2b"),
        ("c", "3"),
    ]
    by_key = {key: entry for key, entry in changes if entry is not None}
    assert by_key["a"].created_at == T1  # removed first, so a new entry
    assert by_key["b"].created_at == T0  # an overwrite keeps it
    commit(entries, changes)
    assert list(entries) == ["b", "a", "c"]


# -- the stores use them, with an injected clock -----------------------------------------------


async def test_in_memory_store_stamps_with_its_clock_and_keeps_created_at() -> None:
    clock = FakeClock(T0)
    store = InMemoryStore(clock=clock)
    await store.set("k", "v1")
    clock.advance(60)
    await store.set("k", "v2")
    await store.set_with_expiry("other", "x", 3)
    k, other = await store.get("k"), await store.get("other")
    assert k is not None
    assert other is not None
    assert (k.value, k.created_at) == ("v2", T0)
    assert other.created_at == T0 + timedelta(seconds=60)


async def test_one_apply_stamps_every_new_key_with_one_time() -> None:
    clock = FakeClock(T0)
    store = InMemoryStore(clock=clock)
    await store.set("old", "1")
    clock.set(T1)
    assert await store.apply([], [Put("old", "2"), Put("x", "1"), Put("y", "1")])
    stamps = {entry.key: entry.created_at for entry in await store.list()}
    assert stamps == {"old": T0, "x": T1, "y": T1}


async def test_file_store_trims_its_clock_to_milliseconds(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    path = tmp_path / "state.json"
    store = FileStore(path, clock=clock)
    await store.set("k", "v1")
    clock.advance(3600)
    await store.set("k", "v2")
    assert await store.compare_and_set("k", "v2", "v3")
    entry, reloaded = await store.get("k"), await FileStore(path).get("k")
    assert entry is not None
    assert reloaded is not None
    assert entry.created_at == T0.replace(microsecond=123000)  # equal to what a reload reads
    assert (reloaded.value, reloaded.created_at) == ("v3", entry.created_at)


async def test_file_store_open_takes_a_clock(tmp_path: Path) -> None:
    async with FileStore.open(tmp_path / "state.json", clock=FakeClock(T1)) as store:
        await store.set("k", "v")
        entry = await store.get("k")
    assert entry is not None
    assert entry.created_at == T1.replace(microsecond=123000)

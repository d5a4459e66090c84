"""The store contract (spec MS-01..MS-06) as plain async checks any backend can run.

There is no pytest dependency: each check raises ``AssertionError`` naming the rule it broke.
``make_store`` is a zero-argument factory, sync or async, returning a fresh, EMPTY store; every
sub-check gets its own store::

    await check_memory_store(InMemoryStore)
    await check_atomic_store(lambda: FileStore(tmp_path / f"{uuid4()}.json"))
    await check_conditional_store(InMemoryStore)
    await check_run_ownership(make_file_store, reopen=lambda s: FileStore(s.path))

The checks of ``ConditionalStore`` (several checks, several writes, one atomic step) and of run
ownership (a superseded owner's fenced write never lands, and it learns it lost) live in
``conditional_contract`` and are re-exported here. Durability across instances is checked only
by ``check_run_ownership``, and only when it is given a ``reopen``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar, cast

from oma_actors.clock import utcnow
from oma_actors.keyspace import checkpoint_key
from oma_actors.stores.base import (
    AtomicStore,
    ExpiringStore,
    MemoryStore,
    is_atomic_store,
)
from oma_actors.testing._contract import TICK, entry_of, expect, keys_of, run_checks
from oma_actors.testing.conditional_contract import check_conditional_store, check_run_ownership

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

_S = TypeVar("_S", bound=MemoryStore)
_A = TypeVar("_A", bound=AtomicStore)
_E = TypeVar("_E", bound=ExpiringStore)


async def check_memory_store(make_store: Callable[[], _S | Awaitable[_S]]) -> None:
    """Check the required surface: get/set/list/delete/clear and created_at (MS-01, MS-04..06).

    An overwrite keeps ``created_at`` and replaces the rest of the entry, ``list`` keeps
    insertion order, ``list(prefix=)`` lists exactly the keys that start with the prefix (as
    plain text: no pattern, collation or case folding), and deleting a missing key is a no-op.

    Raises:
        AssertionError: The store breaks the contract; the message names the failing check.
    """
    await run_checks("memory store", make_store, _MEMORY_CHECKS)


async def check_atomic_store(make_store: Callable[[], _A | Awaitable[_A]]) -> None:
    """Check ``compare_and_set`` (MS-02, MS-04, MS-05), including concurrent callers.

    It writes only when the current value equals the expected one (``None``: the key is
    absent); a successful swap keeps ``created_at`` and replaces the rest of the entry.

    Raises:
        AssertionError: The store breaks the contract; the message names the failing check.
    """
    await run_checks("atomic store", make_store, _ATOMIC_CHECKS)


async def check_expiring_store(make_store: Callable[[], _E | Awaitable[_E]]) -> None:
    """Check ``set_with_expiry`` (MS-03, MS-04, MS-05).

    It stores the entry with ``expires_at_turn``; an overwrite keeps ``created_at``, and a later
    ``set`` or ``compare_and_set`` drops the expiry.

    Raises:
        AssertionError: The store breaks the contract; the message names the failing check.
    """
    await run_checks("expiring store", make_store, _EXPIRING_CHECKS)


# --- MemoryStore ---------------------------------------------------------------------------


async def _get_missing_returns_none(store: MemoryStore) -> None:
    expect(await store.get("missing") is None, "get() of a missing key must return None")
    expect(await store.list() == [], "list() of an empty store must be []")


async def _set_then_get(store: MemoryStore) -> None:
    before = utcnow()
    await store.set("a", "1", {"agent": "x", "n": 1})
    await store.set("b", "2")
    a, b = await entry_of(store, "a"), await entry_of(store, "b")
    expect((a.key, a.value) == ("a", "1"), f"stored ('a', '1'), read {(a.key, a.value)!r}")
    expect(a.metadata == {"agent": "x", "n": 1}, f"metadata read back as {a.metadata!r}")
    expect(b.metadata is None, f"set() without metadata must read None, got {b.metadata!r}")
    expect(a.expires_at_turn is None, "set() must not record expires_at_turn")
    expect(isinstance(a.created_at, datetime), "created_at must be a datetime")
    expect(a.created_at.utcoffset() is not None, "created_at must be timezone-aware")
    slack = timedelta(minutes=5)
    expect(
        before - slack <= a.created_at <= utcnow() + slack,
        f"created_at {a.created_at} is not the time of the write ({before})",
    )


async def _values_round_trip_exactly(store: MemoryStore) -> None:
    values = {
        "empty": "",
        "unicode": "héllo ✓ 🚀 \u2028",
        "json": '{"version":4,"nested":{"a":[1,2]}}',
        checkpoint_key("run-1"): 'line\nbreak\ttab "quote" \\ back',
    }
    for key, value in values.items():
        await store.set(key, value)
    for key, value in values.items():
        got = (await entry_of(store, key)).value
        expect(got == value, f"value of {key!r} changed: stored {value!r}, read {got!r}")
    listed = {entry.key: entry.value for entry in await store.list()}
    expect(listed == values, f"list() values differ from what was stored: {listed!r}")


async def _metadata_is_copied(store: MemoryStore) -> None:
    metadata: dict[str, object] = {"a": 1}
    await store.set("k", "v", metadata)
    metadata["a"] = 2
    metadata["b"] = 3
    got = (await entry_of(store, "k")).metadata
    expect(got == {"a": 1}, f"caller mutation after set() leaked into the store: {got!r}")


async def _overwrite_keeps_created_at(store: MemoryStore) -> None:
    await store.set("k", "v1", {"m": 1})
    first = (await entry_of(store, "k")).created_at
    await asyncio.sleep(TICK)
    await store.set("k", "v2")
    entry = await entry_of(store, "k")
    expect(entry.value == "v2", f"overwrite not visible: {entry.value!r}")
    expect(entry.metadata is None, f"set() must replace the whole entry: {entry.metadata!r}")
    expect(entry.created_at == first, f"created_at changed on overwrite: {first} -> {entry}")


async def _list_keeps_insertion_order(store: MemoryStore) -> None:
    for key in ("a", "b", "c"):
        await store.set(key, f"{key}1")
    await store.set("a", "a2")
    expect(await keys_of(store) == ["a", "b", "c"], f"order after update: {await keys_of(store)}")
    listed = await store.list()
    expect(listed[0].value == "a2", f"list() shows a stale value: {listed[0].value!r}")
    expect(listed[0] == await store.get("a"), "list() and get() disagree about 'a'")


async def _delete_removes_and_ignores_missing(store: MemoryStore) -> None:
    await store.set("a", "1")
    await store.set("b", "2")
    await store.delete("missing")
    expect(await keys_of(store) == ["a", "b"], "delete() of a missing key changed the store")
    await store.delete("a")
    expect(await store.get("a") is None, "get() still finds a deleted key")
    expect(await keys_of(store) == ["b"], f"list() after delete: {await keys_of(store)}")
    await store.set("a", "3")
    expect(await keys_of(store) == ["b", "a"], "a re-inserted key must go to the end of list()")


async def _clear_removes_everything(store: MemoryStore) -> None:
    await store.set("a", "1")
    await store.set("b", "2")
    await store.clear()
    expect(await store.list() == [], "list() is not empty after clear()")
    expect(await store.get("a") is None, "get() finds a key after clear()")
    await store.set("c", "3")
    expect(await keys_of(store) == ["c"], "the store is not usable after clear()")


async def _list_by_prefix_is_plain_text(store: MemoryStore) -> None:
    # Every LIKE, glob and regex metacharacter, and keys that a pattern reading of the prefix,
    # a collation, or an off-by-one range bound would wrongly take in or leave out.
    keys = [
        "a%b/1", "aXb/1", "a_b/1", "a*b/1", "a?b/1", "a[b]/1", "ab/1", "a\\b/1",
        "__oma_run__/r1", "__oma_run__", "__oma_run_/x", "__oma_run__0", "__oma_run__/",
        "__OMA_RUN__/r2", "__oma_run__/r2", "__oma_run__./r3",
        "héllo/1", "hello/1", "he\u0301llo/1", "🚀/1", "🚀🚀", "\U0010ffff/x", "\U0010ffff",
        "\ud7ff/1", "\ue000/1", "\ud7ffz", "A-b", "a-b", "a,b", "a-",
    ]  # fmt: skip
    for index, key in enumerate(keys):
        await store.set(key, str(index))
    await store.set("a%b/1", "again")  # an overwrite keeps its place in the order
    for prefix in (
        "a%", "a_", "a*", "a?", "a[", "a[b", "a\\", "__oma_run__/", "__oma_run__", "__oma_run_",
        "__oma_run__/r2", "__oma_run__/r2x", "héllo", "he", "🚀", "\U0010ffff", "\ud7ff", "a-",
        "a%b/1", "zzz",
    ):  # fmt: skip
        want = [key for key in keys if key.startswith(prefix)]
        got = [entry.key for entry in await store.list(prefix=prefix)]
        expect(got == want, f"list(prefix={prefix!r}) listed {got!r}, expected {want!r}")
    expect(await keys_of(store) == keys, "list() is not every key in insertion order")
    whole = [entry.key for entry in await store.list(prefix="")]
    expect(whole == keys, f"list(prefix='') must list every key, listed {whole!r}")
    (entry,) = await store.list(prefix="a%b/1")
    expect(entry == await store.get("a%b/1"), "list(prefix=) and get() disagree about 'a%b/1'")


_MEMORY_CHECKS = (
    _get_missing_returns_none,
    _set_then_get,
    _values_round_trip_exactly,
    _metadata_is_copied,
    _overwrite_keeps_created_at,
    _list_keeps_insertion_order,
    _delete_removes_and_ignores_missing,
    _clear_removes_everything,
    _list_by_prefix_is_plain_text,
)


# --- AtomicStore ---------------------------------------------------------------------------


def _atomic(store: MemoryStore) -> AtomicStore:
    expect(is_atomic_store(store), "the store has no callable compare_and_set")
    return cast("AtomicStore", store)


async def _cas_none_inserts_only_when_absent(store: MemoryStore) -> None:
    cas = _atomic(store).compare_and_set
    expect(await cas("k", None, "v1", {"m": 1}), "CAS(None) on an absent key must succeed")
    entry = await entry_of(store, "k")
    expect((entry.value, entry.metadata) == ("v1", {"m": 1}), f"CAS(None) wrote {entry!r}")
    expect(not await cas("k", None, "v2"), "CAS(None) on a present key must return False")
    expect((await entry_of(store, "k")).value == "v1", "a failed CAS(None) overwrote the value")


async def _cas_on_missing_key_compares_as_none(store: MemoryStore) -> None:
    cas = _atomic(store).compare_and_set
    expect(not await cas("k", "x", "v"), "CAS('x') on a missing key must return False")
    expect(not await cas("k", "", "v"), "a missing key must compare as None, not ''")
    expect(await store.get("k") is None, "a failed CAS created the key")


async def _cas_mismatch_writes_nothing(store: MemoryStore) -> None:
    await store.set("k", "a", {"m": 1})
    before = await entry_of(store, "k")
    await asyncio.sleep(TICK)
    expect(not await _atomic(store).compare_and_set("k", "b", "c", {"m": 2}), "mismatch -> True")
    after = await entry_of(store, "k")
    expect(
        (after.value, after.metadata, after.created_at)
        == (before.value, before.metadata, before.created_at),
        f"a mismatched CAS changed the entry: {before!r} -> {after!r}",
    )
    expect(await keys_of(store) == ["k"], "a mismatched CAS changed list()")


async def _cas_match_replaces_entry_keeps_created_at(store: MemoryStore) -> None:
    await store.set("a", "1")
    await store.set("k", "pending", {"m": 1})
    await store.set("b", "2")
    first = (await entry_of(store, "k")).created_at
    await asyncio.sleep(TICK)
    metadata: dict[str, object] = {"by": "reviewer"}
    expect(await _atomic(store).compare_and_set("k", "pending", "approved", metadata), "match")
    metadata["by"] = "someone else"
    entry = await entry_of(store, "k")
    expect(entry.value == "approved", f"a successful CAS did not write: {entry.value!r}")
    expect(entry.metadata == {"by": "reviewer"}, f"CAS metadata is {entry.metadata!r}")
    expect(entry.created_at == first, "a successful CAS must keep created_at")
    expect(await keys_of(store) == ["a", "k", "b"], "a CAS-updated key must keep its position")
    expect(await _atomic(store).compare_and_set("k", "approved", "x"), "second match")
    expect((await entry_of(store, "k")).metadata is None, "CAS must replace metadata too")


async def _concurrent_cas_has_one_winner(store: MemoryStore) -> None:
    cas = _atomic(store).compare_and_set
    await store.set("approval", "pending")
    choices = [f"decision-{i}" for i in range(8)]
    results = await asyncio.gather(*(cas("approval", "pending", c) for c in choices))
    winners = [c for c, won in zip(choices, results, strict=True) if won]
    expect(len(winners) == 1, f"{len(winners)} concurrent CAS calls won, expected exactly 1")
    stored = (await entry_of(store, "approval")).value
    expect(stored == winners[0], f"winner wrote {winners[0]!r} but the store holds {stored!r}")
    inserts = await asyncio.gather(*(cas("fresh", None, c) for c in choices))
    expect(sum(inserts) == 1, f"{sum(inserts)} concurrent CAS(None) inserts won, expected 1")


_ATOMIC_CHECKS = (
    _cas_none_inserts_only_when_absent,
    _cas_on_missing_key_compares_as_none,
    _cas_mismatch_writes_nothing,
    _cas_match_replaces_entry_keeps_created_at,
    _concurrent_cas_has_one_winner,
)


# --- ExpiringStore -------------------------------------------------------------------------


def _expiring(store: MemoryStore) -> ExpiringStore:
    expect(callable(getattr(store, "set_with_expiry", None)), "no callable set_with_expiry")
    return cast("ExpiringStore", store)


async def _set_with_expiry_records_turn(store: MemoryStore) -> None:
    metadata: dict[str, object] = {"a": 1}
    await _expiring(store).set_with_expiry("k", "ttl", 7, metadata)
    metadata["a"] = 2
    entry = await entry_of(store, "k")
    expect(entry.value == "ttl", f"value is {entry.value!r}")
    expect(entry.expires_at_turn == 7, f"expires_at_turn is {entry.expires_at_turn!r}")
    expect(entry.metadata == {"a": 1}, f"metadata is {entry.metadata!r} (must be a copy)")


async def _overwrites_keep_created_at_and_replace_expiry(store: MemoryStore) -> None:
    expiring = _expiring(store)
    await expiring.set_with_expiry("k", "v1", 3)
    first = (await entry_of(store, "k")).created_at
    await asyncio.sleep(TICK)
    await expiring.set_with_expiry("k", "v2", 9)
    entry = await entry_of(store, "k")
    expect((entry.expires_at_turn, entry.created_at) == (9, first), f"re-expiry: {entry!r}")
    await store.set("k", "v3")
    entry = await entry_of(store, "k")
    expect(entry.expires_at_turn is None, "set() must drop expires_at_turn (MS-05)")
    expect(entry.created_at == first, "set() after set_with_expiry must keep created_at")
    if is_atomic_store(store):
        await expiring.set_with_expiry("k", "v4", 5)
        expect(await _atomic(store).compare_and_set("k", "v4", "v5"), "CAS after expiry")
        expect((await entry_of(store, "k")).expires_at_turn is None, "CAS must drop expiry")


_EXPIRING_CHECKS = (
    _set_with_expiry_records_turn,
    _overwrites_keep_created_at_and_replace_expiry,
)

__all__ = [
    "check_atomic_store",
    "check_conditional_store",
    "check_expiring_store",
    "check_memory_store",
    "check_run_ownership",
]

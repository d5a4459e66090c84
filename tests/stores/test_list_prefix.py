"""``list(prefix=)``: plain-text prefixes, range bounds, index use, and stores that lack it.

The store contract (``_list_by_prefix_is_plain_text``) runs on every backend; here: a store
with one defect in its prefix listing fails the contract, the range bound is right at the edges
of Unicode, SQLite and PostgreSQL answer from an index, PostgreSQL stays right under a
linguistic collation, and a user-written store whose ``list()`` takes no prefix is listed alike
through every wrapper and by the run and checkpoint listings.
"""

from __future__ import annotations

import builtins
import fnmatch
import sqlite3
from typing import TYPE_CHECKING

import pytest

from oma_actors.checkpoint.listing import list_checkpoints
from oma_actors.keyspace import CHECKPOINT_KEY_PREFIX, RUN_KEY_PREFIX
from oma_actors.runs.listing import list_runs
from oma_actors.stores import InMemoryStore
from oma_actors.stores import postgres as postgres_module
from oma_actors.stores import sqlite as sqlite_module
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import KeyRing
from oma_actors.stores.prefix import list_under, takes_prefix, upper_bound
from oma_actors.stores.redacting import RedactingStore
from oma_actors.testing.forwarding import ForwardingStore
from oma_actors.testing.store_contract import check_memory_store
from oma_actors.testing.stores import MinimalStore, StoreCall

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from service_kit import FreshStores

    from oma_actors.stores import MemoryEntry, MemoryStore


class IgnoresPrefix(InMemoryStore):
    """Lists every entry whatever the prefix."""

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        return await super().list()


class ReadsPrefixAsGlob(InMemoryStore):
    """Matches the prefix as a glob, as an unescaped SCAN MATCH would."""

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        entries = await super().list()
        return [e for e in entries if fnmatch.fnmatchcase(e.key, f"{prefix or ''}*")]


class FoldsCase(InMemoryStore):
    """Compares case-insensitively, as a linguistic collation may."""

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        folded = (prefix or "").lower()
        return [e for e in await super().list() if e.key.lower().startswith(folded)]


class BoundsByLastCharacter(InMemoryStore):
    """A range scan whose bound does not skip the surrogates nor carry past U+10FFFF."""

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        if not prefix:
            return await super().list()
        low, high = prefix, prefix[:-1] + chr(min(ord(prefix[-1]) + 1, 0x10FFFF))
        return [e for e in await super().list() if low <= e.key < high]


class SortsByKey(InMemoryStore):
    """Lists a prefix in key order instead of insertion order."""

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        entries = await super().list(prefix)
        return entries if not prefix else sorted(entries, key=lambda e: e.key)


@pytest.mark.parametrize(
    "broken", [IgnoresPrefix, ReadsPrefixAsGlob, FoldsCase, BoundsByLastCharacter, SortsByKey]
)
async def test_the_contract_catches_a_wrong_prefix_listing(broken: type[InMemoryStore]) -> None:
    with pytest.raises(AssertionError, match="list_by_prefix_is_plain_text"):
        await check_memory_store(broken)


@pytest.mark.parametrize(
    ("prefix", "bound"),
    [
        ("", None),
        ("a", "b"),
        ("__oma_run__/", "__oma_run__0"),
        ("a\U0010ffff", "b"),
        ("\U0010ffff", None),
        ("\U0010ffff\U0010ffff", None),
        ("x\ud7ff", "x\ue000"),
        ("%", "&"),
    ],
)
def test_upper_bound_is_the_least_string_above_the_prefix(prefix: str, bound: str | None) -> None:
    assert upper_bound(prefix) == bound


class OmaStore:
    """A user-written store of the OMA surface: its ``list()`` takes no prefix."""

    def __init__(self) -> None:
        self._entries = InMemoryStore()
        self.listed = 0

    async def get(self, key: str) -> MemoryEntry | None:
        return await self._entries.get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        await self._entries.set(key, value, metadata)

    async def list(self) -> builtins.list[MemoryEntry]:
        self.listed += 1
        return await self._entries.list()

    async def delete(self, key: str) -> None:
        await self._entries.delete(key)

    async def clear(self) -> None:
        await self._entries.clear()


RING = KeyRing({"k1": bytes(range(32))}, active="k1")


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: s,
        RedactingStore,
        ForwardingStore,
        lambda s: EncryptingStore(s, RING),
    ],
    ids=["bare", "redacting", "forwarding", "encrypting"],
)
async def test_a_store_without_prefix_listing_is_listed_whole_and_filtered(wrap: Any) -> None:
    inner = OmaStore()
    store: MemoryStore = wrap(inner)
    for key in ("a/1", "b/1", "a/2", "a_3"):
        await store.set(key, key)
    assert not takes_prefix(inner)  # type: ignore[arg-type]
    assert [e.key for e in await list_under(store, "a/")] == ["a/1", "a/2"]
    assert [e.value for e in await list_under(store, "a/")] == ["a/1", "a/2"]
    assert [e.key for e in await list_under(store, None)] == ["a/1", "b/1", "a/2", "a_3"]
    # An encrypting store also lists once for its first write's key check (a wrong key with the
    # right id must not seal anything beside the values it cannot open).
    assert inner.listed == (4 if isinstance(store, EncryptingStore) else 3)


async def test_wrappers_pass_the_prefix_down() -> None:
    inner = MinimalStore()
    store = EncryptingStore(RedactingStore(ForwardingStore(inner)), RING)
    await store.set("__oma_run__/r1", "{}")
    await store.set("other", "x")
    before = len(inner.calls)  # (the first write's key check lists too)
    assert [e.key for e in await store.list(prefix="__oma_run__/")] == ["__oma_run__/r1"]
    listed = [c for c in inner.calls[before:] if c.op == "list"]
    assert listed == [StoreCall("list", "__oma_run__/")]


async def test_run_and_checkpoint_listings_read_only_their_prefix() -> None:
    store = MinimalStore()
    await store.set(f"{RUN_KEY_PREFIX}r1", "not a record")
    await store.set(f"{CHECKPOINT_KEY_PREFIX}r1", "not a snapshot")
    await store.set("__oma_journal__/r1", "x")
    runs = await list_runs(store)
    checkpoints = await list_checkpoints(store)
    assert [(r.run_id, r.status) for r in runs] == [("r1", "unreadable")]
    assert [(c.key, c.status) for c in checkpoints] == [
        (f"{CHECKPOINT_KEY_PREFIX}r1", "unreadable")
    ]
    listed = [c.key for c in store.calls if c.op == "list"]
    assert listed == [RUN_KEY_PREFIX, CHECKPOINT_KEY_PREFIX]


async def test_sqlite_lists_a_prefix_from_the_key_index(fresh_stores: FreshStores) -> None:
    store = await fresh_stores.sqlite()
    await store.set("__oma_run__/r1", "{}")
    clause, args = sqlite_module._range("__oma_run__/")
    connection = sqlite3.connect(store.path)
    try:
        plan = connection.execute(
            f"EXPLAIN QUERY PLAN {sqlite_module._ROW}{clause} ORDER BY seq", args
        ).fetchall()
    finally:
        connection.close()
    # A search of the key's unique index, not a scan of the table.
    assert any(row[-1].startswith("SEARCH oma_kv USING") and "(key>? AND key<?)" in row[-1]
               for row in plan), plan  # fmt: skip


async def test_postgres_prefix_listing_ignores_a_linguistic_collation(
    fresh_stores: FreshStores,
) -> None:
    import asyncpg

    dsn, table = fresh_stores.postgres_table()
    connection = await asyncpg.connect(dsn)
    try:
        # A table made under an ICU collation, where "A-b" and "a,b" sort between "a-" and "a.".
        await connection.execute(
            f'CREATE TABLE "{table}" (seq BIGSERIAL NOT NULL, key TEXT COLLATE "und-x-icu" '
            "PRIMARY KEY, value TEXT NOT NULL, metadata TEXT, created_at TIMESTAMPTZ NOT NULL, "
            "expires_at_turn INTEGER)"
        )
    finally:
        await connection.close()
    store = await fresh_stores.postgres(table)
    for key in ("a-b", "A-b", "a,b", "ab", "a-", "a.c"):
        await store.set(key, key)
    assert [e.key for e in await store.list(prefix="a-")] == ["a-b", "a-"]
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("SET enable_seqscan = off")
        statement = postgres_module._statements(table)["list_range"]
        rows = await connection.fetch(f"EXPLAIN {statement}", "a-", "a.")
    finally:
        await connection.close()
    plan = "\n".join(row[0] for row in rows)
    assert f"{table}_key" in plan, plan


async def test_a_value_that_does_not_open_is_listed_unreadable_and_hides_no_other() -> None:
    # An EncryptingStore's list() refuses every entry when one does not open; a listing of many
    # runs reads each value on its own (list_each), so another key's value is one unreadable
    # row and the other runs are listed all the same.
    from oma_actors.stores import UnreadableEntry, list_each

    inner = InMemoryStore()
    store = EncryptingStore(inner, RING)
    await store.set(f"{CHECKPOINT_KEY_PREFIX}good/latest", "{}")
    await inner.set(f"{CHECKPOINT_KEY_PREFIX}bad/latest", "oma-sealed:v1:x:bm90IGEgdmFsdWU=")
    each = await list_each(store, CHECKPOINT_KEY_PREFIX)
    assert [type(e).__name__ for e in each] == ["MemoryEntry", "UnreadableEntry"]
    [bad] = [e for e in each if isinstance(e, UnreadableEntry)]
    assert bad.key == f"{CHECKPOINT_KEY_PREFIX}bad/latest"
    assert "'x'" in bad.error  # names the key id it was sealed under
    summaries = await list_checkpoints(store)
    assert [(s.key, s.status) for s in summaries] == [
        (f"{CHECKPOINT_KEY_PREFIX}good/latest", "unreadable"),  # "{}" is no snapshot
        (f"{CHECKPOINT_KEY_PREFIX}bad/latest", "unreadable"),
    ]
    assert "'x'" in (summaries[1].error or "")
    assert "'x'" not in (summaries[0].error or "")  # only the other key's value

"""EncryptingStore beyond the contract: nothing readable at rest, and every way to fail closed.

The contract (``test_contract.py``, backends ``encrypting(...)``) shows the wrapper is a correct
store over every backend; these show it is an encrypted one: raw bytes hold no plaintext, and a
value that is plaintext, tampered, moved, or sealed under a key the ring lacks never reads.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import asyncpg
import pytest
import redis.asyncio
from service_kit import FreshStores

from oma_actors.errors import ConfigurationError, CorruptStoreError, StoreError
from oma_actors.stores import Expect, FileStore, InMemoryStore, Put
from oma_actors.stores.encrypting import EncryptingStore, _context
from oma_actors.stores.keyring import PREFIX, KeyRing
from oma_actors.testing.forwarding import ForwardingStore

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from oma_actors.stores.base import Write

SECRET = "customer-ssn-078-05-1120"
OLD = bytes(range(32))
NEW = bytes(range(32, 64))


def ring(active: str = "k1", **keys: bytes) -> KeyRing:
    return KeyRing(keys or {"k1": OLD}, active=active)


async def sealed_at(store: EncryptingStore, key: str) -> str:
    entry = await store.inner.get(key)
    assert entry is not None
    return entry.value


async def test_file_and_sqlite_bytes_hold_no_plaintext(
    tmp_path: Path, fresh_stores: FreshStores
) -> None:
    file_store = FileStore(tmp_path / "state.json")
    await EncryptingStore(file_store, ring()).set("note", SECRET, {"namespace": "test"})
    await file_store.aclose()
    raw = (tmp_path / "state.json").read_bytes()
    assert b"note" in raw  # the entry is there, readable by key
    assert SECRET.encode() not in raw

    sqlite = await fresh_stores.sqlite(tmp_path / "state.db")
    await EncryptingStore(sqlite, ring()).set("note", SECRET)
    await sqlite.aclose()
    raw = b"".join([path.read_bytes() for path in tmp_path.glob("state.db*")])  # noqa: ASYNC240
    assert b"note" in raw
    assert SECRET.encode() not in raw


async def test_postgres_rows_and_redis_values_hold_no_plaintext(
    fresh_stores: FreshStores, postgres_dsn: str, redis_url: str
) -> None:
    postgres = await fresh_stores.postgres()
    await EncryptingStore(postgres, ring()).set("note", SECRET)
    connection = await asyncpg.connect(postgres_dsn)
    try:
        rows = await connection.fetch(f'SELECT key, value FROM "{postgres.table}"')
    finally:
        await connection.close()
    assert sorted(row["key"] for row in rows) == ["__oma_key__/k1", "note"]  # + the key proof
    assert all(SECRET not in row["value"] for row in rows)

    store = await fresh_stores.redis()
    await EncryptingStore(store, ring()).set("note", SECRET)
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        names = await client.keys(f"{store.prefix}*")
        dumped = [await client.dump(name) for name in names]
    finally:
        await client.aclose()
    assert names
    assert all(blob is not None and SECRET.encode() not in blob for blob in dumped)


async def test_a_flipped_byte_fails_closed_naming_the_entry() -> None:
    store = EncryptingStore(InMemoryStore(), ring())
    await store.set("note", SECRET)
    envelope = await sealed_at(store, "note")
    raw = bytearray(base64.b64decode(envelope.rsplit(":", 1)[1]))
    raw[-1] ^= 0x01
    tampered = envelope.rsplit(":", 1)[0] + ":" + base64.b64encode(bytes(raw)).decode()
    await store.inner.set("note", tampered)
    with pytest.raises(CorruptStoreError, match=r"'note'.*authentication failed"):
        await store.get("note")
    with pytest.raises(CorruptStoreError, match="'note'"):
        await store.list()


async def test_plaintext_in_the_inner_store_is_never_returned() -> None:
    store = EncryptingStore(InMemoryStore(), ring())
    await store.set("good", "sealed")
    await store.inner.set("planted", "approved")
    with pytest.raises(CorruptStoreError, match=r"'planted'.*not sealed"):
        await store.get("planted")
    with pytest.raises(CorruptStoreError, match=r"'planted'.*not sealed"):
        await store.list()
    # Nor does a check compare against it: a compare-and-set on it fails closed, not open.
    with pytest.raises(CorruptStoreError, match="'planted'"):
        await store.compare_and_set("planted", "approved", "x")
    with pytest.raises(CorruptStoreError, match="'planted'"):
        await store.apply([Expect("planted", None)], [Put("other", "x")])
    assert await store.inner.get("other") is None


async def test_a_value_moved_to_another_entry_does_not_open() -> None:
    store = EncryptingStore(InMemoryStore(), ring())
    await store.set("a", "alpha")
    await store.set("b", "beta")
    first, second = await sealed_at(store, "a"), await sealed_at(store, "b")
    await store.inner.set("a", second)
    await store.inner.set("b", first)
    for key in ("a", "b"):
        with pytest.raises(CorruptStoreError, match=f"'{key}'.*authentication failed"):
            await store.get(key)


async def test_an_unknown_key_id_and_a_lost_key_name_the_key() -> None:
    inner = InMemoryStore()
    await EncryptingStore(inner, ring("old", old=OLD)).set("note", SECRET)
    without_old = EncryptingStore(inner, ring("new", new=NEW))
    with pytest.raises(CorruptStoreError, match=r"'note'.*key id 'old'.*not in the ring"):
        await without_old.get("note")


async def test_a_relabeled_key_id_fails_even_when_both_ids_hold_the_same_key() -> None:
    store = EncryptingStore(InMemoryStore(), ring("a", a=OLD, b=OLD))
    await store.set("note", SECRET)
    envelope = await sealed_at(store, "note")
    assert envelope.startswith(PREFIX + "a:")
    await store.inner.set("note", envelope.replace(PREFIX + "a:", PREFIX + "b:", 1))
    with pytest.raises(CorruptStoreError, match="authentication failed"):
        await store.get("note")


async def test_the_same_id_with_another_key_fails_authentication() -> None:
    inner = InMemoryStore()
    await EncryptingStore(inner, ring("k", k=OLD)).set("note", SECRET)
    with pytest.raises(CorruptStoreError, match=r"'note'.*key 'k'.*authentication failed"):
        await EncryptingStore(inner, ring("k", k=NEW)).get("note")


async def test_rotation_reads_old_values_and_seals_new_ones_under_the_active_key() -> None:
    inner = InMemoryStore()
    before = EncryptingStore(inner, ring("old", old=OLD))
    await before.set("kept", "v-old")
    after = EncryptingStore(inner, KeyRing({"new": NEW, "old": OLD}, active="new"))
    assert (await after.get("kept")) is not None
    assert [entry.value for entry in await after.list()] == ["v-old"]
    # A compare-and-set against a value sealed under the old key compares plaintexts.
    assert await after.compare_and_set("kept", "v-old", "v-new")
    assert (await sealed_at(after, "kept")).startswith(PREFIX + "new:")
    assert not await after.compare_and_set("kept", "v-old", "v-newer")
    assert [entry.value for entry in await after.list()] == ["v-new"]


class ResealingStore(ForwardingStore):
    """Before its first inner ``apply``, re-seals ``key`` to the same plaintext (a rotation)."""

    def __init__(self, inner: InMemoryStore, key: str) -> None:
        super().__init__(inner)
        self.outer: EncryptingStore | None = None
        self.key = key
        self.resealed = False

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        if not self.resealed and self.outer is not None:
            self.resealed = True
            plain = await self.outer.get(self.key)
            assert plain is not None
            await self.inner.set(self.key, self.outer.seal(self.key, plain.value))
        return await super()._apply(checks, writes)


async def test_a_concurrent_reseal_of_the_same_plaintext_does_not_fail_a_holding_check() -> None:
    inner = ResealingStore(InMemoryStore(), "fence")
    store = EncryptingStore(inner, ring())
    inner.outer = store
    await store.set("fence", "token-7")
    assert await store.apply([Expect("fence", "token-7")], [Put("snapshot", "s1")])
    assert inner.resealed
    got = await store.get("snapshot")
    assert got is not None
    assert got.value == "s1"


async def test_a_lone_surrogate_is_a_store_error_and_nothing_is_written() -> None:
    store = EncryptingStore(InMemoryStore(), ring())
    with pytest.raises(StoreError, match=r"'b'.*not valid Unicode"):
        await store.apply([], [Put("a", "1"), Put("b", "lone \ud800")])
    assert await store.inner.list() == []


class RefusingStore(ForwardingStore):
    """An inner store whose ``apply`` and ``compare_and_set`` refuse even when their checks
    hold (a broken backend)."""

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        return False

    async def _compare_and_set(self, *args: object, **kwargs: object) -> bool:
        return False


async def test_an_inner_store_that_keeps_refusing_is_an_error_not_a_loop() -> None:
    store = EncryptingStore(RefusingStore(InMemoryStore()), ring())
    with pytest.raises(StoreError, match=r"refused 64 times"):
        await store.apply([Expect("k", None)], [Put("k", "v")])
    # The expectation holds every time it is read: never a False, which means "it did not".
    with pytest.raises(StoreError, match=r"refused 64 times"):
        await store.compare_and_set("k", None, "v")


async def test_a_stale_guess_is_refused_by_the_inner_store_and_read_again() -> None:
    inner = InMemoryStore()
    writer, other = EncryptingStore(inner, ring()), EncryptingStore(inner, ring())
    await writer.set("record", "v1")  # the writer now guesses its own sealed string
    await other.set("record", "v1")  # same plaintext, another seal: the guess is stale
    assert await writer.apply([Expect("record", "v1")], [Put("record", "v2")])
    await other.set("record", "v3")
    assert not await writer.compare_and_set("record", "v2", "v4")
    assert [entry.value for entry in await other.list()] == ["v3"]


def test_it_refuses_what_is_not_a_store_or_a_ring() -> None:
    with pytest.raises(ConfigurationError, match="needs a store with get/set/list/delete/clear"):
        EncryptingStore(object(), ring())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a KeyRing"):
        EncryptingStore(InMemoryStore(), OLD)  # type: ignore[arg-type]


async def test_an_authentic_payload_that_is_no_utf8_is_corrupt_naming_the_entry() -> None:
    # Only a writer holding the key can seal it; still the reader hands out no undecodable text.
    store = EncryptingStore(InMemoryStore(), ring())
    await store.inner.set("k", store.keyring.seal(b"\xff\xfe", _context("k")))
    with pytest.raises(CorruptStoreError, match=r"'k'.*sealed bytes are not UTF-8"):
        await store.get("k")

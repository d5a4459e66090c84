"""PostgresStore and RedisStore beyond the contract: corrupt rows, bad input, closed stores."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
import redis.asyncio
from service_kit import FreshStores

from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.stores import Put


async def test_a_corrupt_postgres_row_is_a_corrupt_store_error(
    fresh_stores: FreshStores, postgres_dsn: str
) -> None:
    store = await fresh_stores.postgres()
    await store.set("k", "v", {"m": 1})
    connection = await asyncpg.connect(postgres_dsn)
    try:
        await connection.execute(f'UPDATE "{store.table}" SET metadata = $1', "[1, 2]")
    finally:
        await connection.close()
    with pytest.raises(CorruptStoreError, match="non-object metadata in entry 'k'") as caught:
        await store.get("k")
    assert store.table in str(caught.value)


async def test_a_corrupt_redis_entry_is_a_corrupt_store_error(
    fresh_stores: FreshStores, redis_url: str
) -> None:
    store = await fresh_stores.redis()
    await store.set("k", "v")
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await client.hset(f"{store.prefix}meta", "k", "{garbage")
    finally:
        await client.aclose()
    with pytest.raises(CorruptStoreError, match="unreadable metadata of entry 'k'") as caught:
        await store.list()
    assert store.prefix in str(caught.value)


async def test_a_redis_key_of_the_wrong_type_fails_a_write_before_any_of_it_lands(
    fresh_stores: FreshStores, redis_url: str
) -> None:
    store = await fresh_stores.redis()
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await client.set(f"{store.prefix}order", "not a sorted set")
    finally:
        await client.aclose()
    with pytest.raises(StoreError, match="corrupt store"):
        await store.apply([], [Put("a", "1"), Put("b", "2")])
    assert await store.get("a") is None


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_bad_input_is_a_store_error_and_writes_nothing(
    backend: str, fresh_stores: FreshStores
) -> None:
    store = await (fresh_stores.postgres() if backend == "postgres" else fresh_stores.redis())
    await store.set("a", "1")
    with pytest.raises(StoreError, match="not JSON-serializable"):
        await store.apply([], [Put("b", "2"), Put("c", "3", {"when": object()})])
    with pytest.raises(StoreError):
        await store.apply([], [Put("b", "2"), Put("c", "lone \ud800")])
    assert [entry.key for entry in await store.list()] == ["a"]
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.get("a")


async def test_two_pools_on_one_table_have_one_winner_for_an_absent_key(
    fresh_stores: FreshStores,
) -> None:
    # An absent key has no row to lock: only the per-key advisory lock stops both inserting.
    first = await fresh_stores.postgres()
    second = await fresh_stores.postgres(first.table)
    results = await asyncio.gather(
        *(
            store.compare_and_set("fresh", None, f"v{n}")
            for n, store in enumerate([first, second] * 6)
        )
    )
    assert sum(results) == 1

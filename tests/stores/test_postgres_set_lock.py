"""``PostgresStore.set`` takes the key's advisory lock, like ``apply`` (the mutant of issue 24).

``apply``'s check that a key is ABSENT has no row to lock: only the advisory lock on the key's
name makes a concurrent ``set`` wait. Here a second connection plays a compare-and-set that
checked the key absent and holds its lock; a ``set`` that took no lock would write inside that
window and then be silently overwritten by the compare-and-set's insert.
"""

from __future__ import annotations

import asyncio

import asyncpg
from service_kit import FreshStores

from oma_actors.stores.postgres import lock_id


def _lock_parts(lock: int) -> tuple[int, int]:
    """pg_locks shows a bigint advisory lock as two unsigned 32-bit halves."""
    unsigned = lock & 0xFFFFFFFFFFFFFFFF
    return unsigned >> 32, unsigned & 0xFFFFFFFF


async def test_set_waits_for_a_compare_and_set_holding_the_keys_lock(
    fresh_stores: FreshStores, postgres_dsn: str
) -> None:
    store = await fresh_stores.postgres()
    key = "__oma_approval__/apr_race"
    high, low = _lock_parts(lock_id(store.table, key))
    rival = await asyncpg.connect(postgres_dsn)
    try:
        async with rival.transaction():
            # A compare-and-set(key, None, ...) in flight: locked, and found the key absent.
            await rival.execute("SELECT pg_advisory_xact_lock($1)", lock_id(store.table, key))
            table = f'"{store.table}"'
            assert await rival.fetchval(f"SELECT value FROM {table} WHERE key = $1", key) is None
            writer = asyncio.get_running_loop().create_task(store.set(key, "set"))
            while True:  # until the set either waits on the lock, or has written past it
                waiting = await rival.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                    "AND classid = $1 AND objid = $2",
                    high,
                    low,
                )
                if waiting:
                    break
                assert not writer.done(), "set() wrote while another writer held the key's lock"
                await asyncio.sleep(0.01)
            await rival.execute(
                f"INSERT INTO {table} (key, value, created_at) VALUES ($1, 'cas', now())", key
            )
        await writer  # the rival committed: the set goes on, after it
    finally:
        await rival.close()
    entry = await store.get(key)
    assert entry is not None
    assert entry.value == "set"  # serialized: the compare-and-set, then the set

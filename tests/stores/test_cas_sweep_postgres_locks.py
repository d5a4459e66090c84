"""``PostgresStore.apply`` locks every key it checks or writes, in one order, and its checks
read ``FOR UPDATE`` (mutation sweep of the store's transaction guards).

A second connection (the rival) stalls the store's transaction at a chosen point: it holds an
uncommitted row the store must write (the store waits on the rival's transaction id), a table
lock, or an advisory lock. Each test then waits (by polling ``pg_locks``, never by a sleep
being long enough) until the store's transactions are where the test needs them, lets the rival
go, and checks that the outcome is one some serial order of the transactions gives.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import asyncpg

from oma_actors.stores.base import Expect, Put
from oma_actors.stores.postgres import lock_id

if TYPE_CHECKING:
    from service_kit import FreshStores

    from oma_actors.stores.postgres import PostgresStore


def _lock_parts(lock: int) -> tuple[int, int]:
    """pg_locks shows a bigint advisory lock as two unsigned 32-bit halves."""
    unsigned = lock & 0xFFFFFFFFFFFFFFFF
    return unsigned >> 32, unsigned & 0xFFFFFFFF


async def _until(rival: asyncpg.Connection, count: int, query: str, *args: Any) -> None:
    """Poll ``query`` (a count) until it reaches ``count`` (a 30 s deadline only stops a hang)."""
    async with asyncio.timeout(30):
        while True:
            if await rival.fetchval(query, *args) >= count:
                return
            await asyncio.sleep(0.01)


async def _until_waiting_on_advisory(
    rival: asyncpg.Connection, store: PostgresStore, keys: list[str], count: int, *tasks: Any
) -> None:
    """Until ``count`` advisory locks of ``keys`` are waited for, or every task has finished."""
    parts = [_lock_parts(lock_id(store.table, key)) for key in keys]
    query = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND (classid::bigint, objid::bigint) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[]))"
    )
    highs, lows = [high for high, _ in parts], [low for _, low in parts]
    async with asyncio.timeout(30):
        while await rival.fetchval(query, highs, lows) < count:
            if all(task.done() for task in tasks):
                return
            await asyncio.sleep(0.01)


async def _stall_on(rival: asyncpg.Connection, store: PostgresStore, key: str) -> str:
    """In the rival's open transaction, insert ``key`` uncommitted; its transaction id."""
    table = f'"{store.table}"'
    await rival.execute(
        f"INSERT INTO {table} (key, value, created_at) VALUES ($1, 'r', now())", key
    )
    xid: str = await rival.fetchval(
        "SELECT transactionid::text FROM pg_locks WHERE locktype = 'transactionid' "
        "AND pid = pg_backend_pid() AND granted"
    )
    return xid


_WAITING_ON_XID = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted "
    "AND transactionid::text = $1"
)


async def test_an_unchecked_write_of_a_key_waits_for_a_transaction_that_checked_it(
    fresh_stores: FreshStores, postgres_dsn: str
) -> None:
    # first: checks "k" absent, then writes "stall" (held up by the rival) and "k".
    # second: writes "k" with no check of its own. Only the advisory lock on "k", taken for a
    # WRITE key, makes it wait; without it "k" = "b" commits inside first's window and is then
    # silently overwritten by first, whose check no longer held: a lost update.
    store = await fresh_stores.postgres()
    rival = await asyncpg.connect(postgres_dsn)
    try:
        transaction = rival.transaction()
        await transaction.start()
        xid = await _stall_on(rival, store, "stall")
        first = asyncio.get_running_loop().create_task(
            store.apply([Expect("k", None)], [Put("stall", "1"), Put("k", "a")])
        )
        await _until(rival, 1, _WAITING_ON_XID, xid)
        second = asyncio.get_running_loop().create_task(store.apply([], [Put("k", "b")]))
        await _until_waiting_on_advisory(rival, store, ["k"], 1, second)
        await transaction.rollback()
        assert await first
        assert await second
    finally:
        await rival.close()
    entry = await store.get("k")
    assert entry is not None
    assert entry.value == "b"  # serial: first (checked k absent, wrote a), then second


async def test_crossed_checks_of_absent_keys_have_one_winner(
    fresh_stores: FreshStores, postgres_dsn: str
) -> None:
    # first: "k" absent -> write "j"; second: "j" absent -> write "k". Serially one of them
    # must fail. An absent key has no row to lock: only the advisory lock on each CHECKED key
    # keeps the second from reading "j" absent while the first is about to write it.
    store = await fresh_stores.postgres()
    rival = await asyncpg.connect(postgres_dsn)
    try:
        transaction = rival.transaction()
        await transaction.start()
        xid = await _stall_on(rival, store, "j")
        first = asyncio.get_running_loop().create_task(
            store.apply([Expect("k", None)], [Put("j", "first")])
        )
        await _until(rival, 1, _WAITING_ON_XID, xid)
        second = asyncio.get_running_loop().create_task(
            store.apply([Expect("j", None)], [Put("k", "second")])
        )
        await _until_waiting_on_advisory(rival, store, ["j", "k"], 1, second)
        await transaction.rollback()
        results = [await first, await second]
    finally:
        await rival.close()
    assert results == [True, False]
    assert [entry.key for entry in await store.list()] == ["j"]


async def test_a_check_waits_for_a_clear_in_progress(
    fresh_stores: FreshStores, postgres_dsn: str
) -> None:
    # The rival plays clear(): the table locked EXCLUSIVE, every row deleted, not committed.
    # A check reading FOR UPDATE waits for it and then finds the key gone; a plain read would
    # see the value clear() is deleting and write after the clear as if it still held.
    store = await fresh_stores.postgres()
    await store.set("k", "v")
    table = f'"{store.table}"'
    rival = await asyncpg.connect(postgres_dsn)
    try:
        transaction = rival.transaction()
        await transaction.start()
        await rival.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        await rival.execute(f"DELETE FROM {table}")
        applying = asyncio.get_running_loop().create_task(
            store.apply([Expect("k", "v")], [Put("k", "w")])
        )
        await _until(
            rival,
            1,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND NOT granted "
            "AND relation = $1::text::regclass",
            table,
        )
        await transaction.commit()
        assert not await applying
    finally:
        await rival.close()
    assert await store.list() == []


async def test_two_writers_locking_the_same_keys_never_deadlock(
    fresh_stores: FreshStores, postgres_dsn: str
) -> None:
    # first locks {a, b} for (check a, write b), second {b, a} for (check b, write a). Taken in
    # the order given they deadlock (PostgreSQL aborts one: a StoreError); in one global order
    # they serialize and exactly one wins.
    store = await fresh_stores.postgres()
    rival = await asyncpg.connect(postgres_dsn)
    try:
        await rival.execute("SELECT pg_advisory_lock($1)", lock_id(store.table, "a"))
        first = asyncio.get_running_loop().create_task(
            store.apply([Expect("a", None)], [Put("b", "first")])
        )
        await _until_waiting_on_advisory(rival, store, ["a", "b"], 1, first)
        second = asyncio.get_running_loop().create_task(
            store.apply([Expect("b", None)], [Put("a", "second")])
        )
        await _until_waiting_on_advisory(rival, store, ["a", "b"], 2, first, second)
        await rival.execute("SELECT pg_advisory_unlock($1)", lock_id(store.table, "a"))
        results = await asyncio.gather(first, second)
    finally:
        await rival.close()
    assert sorted(results) == [False, True]
    assert len(await store.list()) == 1

"""PostgresStore: a store in one PostgreSQL table, atomic across processes and machines.

Every write is a transaction that first takes a transaction-scoped advisory lock for each key it
checks or writes, in one global order (so two writers never deadlock). Row locks alone cannot
guard a check that a key is ABSENT (there is no row to lock), and two such checks would both
pass and both insert; a lock on the key's name covers present and absent keys alike. Checks then
read with ``FOR UPDATE``, which also makes ``clear()`` (``LOCK TABLE ... EXCLUSIVE``) wait for
them or them for it. Reads need no lock: each statement sees only committed transactions.

asyncpg is imported on first use, so the base install does not need the ``postgres`` extra.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.errors import ConfigurationError, StoreError
from oma_actors.stores.base import Expect, Put, Remove
from oma_actors.stores.conditional import AppliesConditionally
from oma_actors.stores.database import DatabaseStore
from oma_actors.stores.prefix import upper_bound
from oma_actors.stores.rows import (
    encode_batch,
    encode_metadata,
    make_row_entry,
    redact,
    refusing_lone_surrogates,
)

if TYPE_CHECKING:
    import builtins
    from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
    from types import ModuleType

    import asyncpg
    from asyncpg.pool import PoolConnectionProxy

    from oma_actors.clock import Clock
    from oma_actors.stores.base import MemoryEntry, Write

_T = TypeVar("_T")
_Connection: TypeAlias = "PoolConnectionProxy[asyncpg.Record]"

DEFAULT_TABLE = "oma_kv"
"""The table a ``PostgresStore`` (and a ``postgresql://`` URI without ``?table=``) uses."""
TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,54}")
"""What ``table`` may be: a plain identifier short enough to name its index too."""
# Any constant works: it only serializes concurrent CREATE TABLE IF NOT EXISTS, which races on
# PostgreSQL's catalog when two processes create one table at the same moment.
_CREATE_LOCK = 0x6F6D615F6B76


def asyncpg_module() -> ModuleType:
    """The asyncpg module, imported on first use.

    Raises:
        ConfigurationError: the ``postgres`` extra is not installed.
    """
    try:
        import asyncpg  # the optional dependency is loaded only when used
    except ImportError as exc:
        raise ConfigurationError(
            "PostgresStore needs asyncpg: install the extra with pip install 'oma-actors[postgres]'"
        ) from exc
    return asyncpg


def driver_errors(driver: ModuleType, *more: type[Exception]) -> tuple[type[Exception], ...]:
    """Every asyncpg failure a store call can meet, reported as a ``StoreError``.

    ``InternalClientError`` is no ``InterfaceError``: asyncpg raises it when a connection breaks
    mid-protocol (a PostgreSQL restart), and it escaped as an untyped error (issue 24, item 8).
    """
    return (driver.PostgresError, driver.InterfaceError, driver.InternalClientError, *more)


class PostgresStore(DatabaseStore["asyncpg.Pool"], AppliesConditionally):
    """A store in one PostgreSQL table, on an asyncpg connection pool.

    ``compare_and_set`` and ``apply`` are atomic across every process and machine using the same
    table. It satisfies ``ConditionalStore`` (so ``AtomicStore``) and ``ExpiringStore``;
    ``list()`` keeps insertion order and an overwrite keeps its position and ``created_at``.
    Use ``async with PostgresStore(dsn) as store``: it connects eagerly, creates the table if
    it is missing, and closes the pool on exit. A store used without ``async with`` connects on
    first use; then call ``aclose()``.

    Args:
        dsn: A ``postgresql://user[:password]@host[:port]/database`` URI.
        table: The table's name: a plain identifier of at most 55 characters.
        clock: Stamps ``created_at`` of new keys.
        max_connections: The most connections the pool opens.
        connect_timeout: Seconds to wait for the server before failing.

    Raises:
        ConfigurationError: ``table`` is not a plain identifier.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = DEFAULT_TABLE,
        clock: Clock = SYSTEM_CLOCK,
        max_connections: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        if not TABLE_NAME.fullmatch(table):
            raise ConfigurationError(
                f"PostgresStore table {table!r} is not a plain identifier (letters, digits, _)"
            )
        super().__init__(store_name(dsn, table))
        self._dsn = dsn
        self._table = table
        self._clock = clock
        self._max_connections = max_connections
        self._connect_timeout = connect_timeout
        self._sql = _statements(table)

    @property
    def table(self) -> str:
        """The name of the store's table."""
        return self._table

    @property
    def dsn(self) -> str:
        """The DSN the store connects with (it may hold a password: never show it)."""
        return self._dsn

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key``, or ``None`` when there is none."""
        pool = await self._connected()
        row = await self._call(pool.fetchrow(self._sql["get"], key))
        return None if row is None else make_row_entry(self._name, *row)

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        """Apply ``writes`` in order, in one transaction, only if every check holds.

        Returns:
            ``True`` if every check held and the transaction committed, ``False`` on a mismatch
            (nothing written).

        Raises:
            StoreError: A ``Put``'s metadata is not JSON-serializable (nothing written), a key
                or value holds a lone surrogate (named; the transaction rolled back), or the
                database failed (the transaction rolled back, or its outcome is unknown when
                the connection broke during the commit).
        """
        batch = encode_batch(writes)
        now = self._clock.now()
        pool = await self._connected()

        async def body(connection: _Connection) -> bool:
            await self._lock(connection, [c.key for c in checks] + [w.key for w in writes])
            for check in checks:
                current = await connection.fetchval(self._sql["check"], check.key)
                if current != check.value:
                    return False
            for write, metadata in batch:
                if isinstance(write, Put):
                    args = (write.key, write.value, metadata, now, None)
                    await connection.execute(self._sql["upsert"], *args)
                else:
                    await connection.execute(self._sql["delete"], write.key)
            return True

        with refusing_lone_surrogates(self._name, checks, writes):
            return await self._transaction(pool, body)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return every entry in insertion order; with ``prefix``, only keys that start with it.

        A prefix is a range scan on the ``"C"``-collated key index: byte order, whatever the
        database's collation (a linguistic one would sort ``"a-b"`` between ``"a"`` and
        ``"ab"``), and never a ``LIKE``, so the prefix's ``%`` and ``_`` stay text.
        """
        pool = await self._connected()
        if not prefix:
            fetch = pool.fetch(self._sql["list"])
        elif (bound := upper_bound(prefix)) is None:
            fetch = pool.fetch(self._sql["list_from"], prefix)
        else:
            fetch = pool.fetch(self._sql["list_range"], prefix, bound)
        rows = await self._call(fetch)
        return [make_row_entry(self._name, *row) for row in rows]

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is a no-op."""
        await self.apply((), (Remove(key),))

    async def clear(self) -> None:
        """Remove every entry."""
        pool = await self._connected()

        async def body(connection: _Connection) -> None:
            await connection.execute(self._sql["lock_table"])
            await connection.execute(self._sql["clear"])

        await self._transaction(pool, body)

    async def _upsert(
        self, key: str, value: str, metadata: Mapping[str, Any] | None, expires: int | None
    ) -> None:
        encoded = encode_metadata(metadata, key)
        now = self._clock.now()
        pool = await self._connected()

        # One autocommit statement: it takes the key's advisory lock before it writes and holds
        # it to its own commit, so it serializes with apply()'s checks like a transaction
        # would, in one round trip instead of four (bench/store_postgres.py, P12).
        lock = lock_id(self._table, key)
        args = (key, value, encoded, now, expires, lock)
        with refusing_lone_surrogates(self._name, (), (Put(key, value),)):
            await self._call(pool.execute(self._sql["locked_upsert"], *args))

    async def _lock(self, connection: _Connection, keys: Iterable[str]) -> None:
        # Sorted: every writer takes its locks in one global order, so none waits in a cycle.
        ids = sorted({lock_id(self._table, key) for key in keys})
        await connection.executemany("SELECT pg_advisory_xact_lock($1)", [(i,) for i in ids])

    async def _transaction(
        self, pool: asyncpg.Pool, body: Callable[[_Connection], Awaitable[_T]]
    ) -> _T:
        async def run() -> _T:
            async with pool.acquire() as connection, connection.transaction():
                return await body(connection)

        return await self._call(run())

    def _failures(self) -> tuple[type[Exception], ...]:
        return driver_errors(asyncpg_module(), OSError, ValueError)

    async def _disconnect(self, handle: asyncpg.Pool) -> None:
        await close_pool(handle)

    async def _connect(self) -> asyncpg.Pool:
        """Open the pool, after creating the table and its indexes if they are missing."""
        ddl = (self._sql["create"], self._sql["index"], self._sql["key_index"])
        return await open_pool(
            self._dsn,
            self._name,
            ddl,
            max_size=self._max_connections,
            connect_timeout=self._connect_timeout,
        )


async def close_pool(pool: asyncpg.Pool) -> None:
    """Close ``pool``, waiting up to 10 s for connections still in use, then terminate it."""
    try:
        async with asyncio.timeout(10):
            await pool.close()
    except TimeoutError:
        pool.terminate()


async def store_call(name: str, operation: Awaitable[_T]) -> _T:
    """``await operation``, every asyncpg failure raised as a ``StoreError`` naming ``name``."""
    try:
        return await operation
    except driver_errors(asyncpg_module(), OSError, ValueError) as exc:
        raise StoreError(f"{name}: {exc}") from exc


def store_name(dsn: str, table: str) -> str:
    """How a store (or its journal) names itself in errors: the DSN without password, the table.

    Equal names mean the same database and table, as far as this process can tell.
    """
    return f"{redact(dsn)} (table {table})"


async def open_pool(
    dsn: str, name: str, ddl: Sequence[str], *, max_size: int, connect_timeout: float
) -> asyncpg.Pool:
    """An asyncpg pool on ``dsn``, after running ``ddl`` (``CREATE ... IF NOT EXISTS``) once.

    Raises:
        ConfigurationError: asyncpg is missing or the DSN is malformed.
        StoreError: the server is unreachable, refused the credentials, or the DDL failed.
    """
    driver = asyncpg_module()
    try:
        pool: asyncpg.Pool = await driver.create_pool(
            dsn, min_size=1, max_size=max_size, timeout=connect_timeout, reset=_reset
        )
    except driver.ClientConfigurationError as exc:
        raise ConfigurationError(f"{name}: {exc}") from exc
    except driver_errors(driver, OSError, ValueError) as exc:
        raise StoreError(f"{name}: cannot connect ({exc})") from exc
    try:
        async with pool.acquire() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", _CREATE_LOCK)
            for statement in ddl:
                await connection.execute(statement)
    except BaseException as exc:
        await pool.close()
        if isinstance(exc, driver_errors(driver, OSError)):
            raise StoreError(f"{name}: cannot create the table ({exc})") from exc
        raise
    return pool


async def _reset(connection: _Connection) -> None:
    """Return a pooled connection clean, cheaply.

    asyncpg's default reset runs four statements per release (unlock all, close cursors,
    unlisten, reset settings). This store takes only transaction-scoped locks and changes no
    session state, so the only thing a connection can come back with is an unfinished
    transaction (a cancelled caller), which is rolled back.
    """
    if connection.is_in_transaction():
        await connection.execute("ROLLBACK")


def lock_id(table: str, key: str) -> int:
    """The advisory lock id (signed 64-bit) of ``key`` of ``table``; collisions only serialize."""
    digest = hashlib.blake2b(f"{table}\0{key}".encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def _statements(name: str) -> dict[str, str]:
    table = f'"{name}"'
    columns = "key, value, metadata, created_at, expires_at_turn"
    return {
        # seq gives list() its insertion order: an upsert keeps the row and so its seq.
        "create": (
            f"CREATE TABLE IF NOT EXISTS {table} (seq BIGSERIAL NOT NULL, key TEXT PRIMARY KEY, "
            "value TEXT NOT NULL, metadata TEXT, created_at TIMESTAMPTZ NOT NULL, "
            "expires_at_turn INTEGER)"
        ),
        "index": f'CREATE INDEX IF NOT EXISTS "{name}_seq" ON {table} (seq)',
        "get": f"SELECT {columns} FROM {table} WHERE key = $1",
        "list": f"SELECT {columns} FROM {table} ORDER BY seq",
        # The prefix scans compare under "C" (code point order, as upper_bound assumes); the
        # primary key's index has the database's collation, so they get an index of their own.
        "key_index": f'CREATE INDEX IF NOT EXISTS "{name}_key" ON {table} (key COLLATE "C")',
        "list_from": (f'SELECT {columns} FROM {table} WHERE key COLLATE "C" >= $1 ORDER BY seq'),
        "list_range": (
            f'SELECT {columns} FROM {table} WHERE key COLLATE "C" >= $1 '
            'AND key COLLATE "C" < $2 ORDER BY seq'
        ),
        "check": f"SELECT value FROM {table} WHERE key = $1 FOR UPDATE",
        "upsert": (
            f"INSERT INTO {table} ({columns}) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO "
            "UPDATE SET value = EXCLUDED.value, metadata = EXCLUDED.metadata, "
            "expires_at_turn = EXCLUDED.expires_at_turn"
        ),
        "locked_upsert": (
            "WITH held AS (SELECT pg_advisory_xact_lock($6::bigint)) "
            f"INSERT INTO {table} ({columns}) "
            "SELECT $1::text, $2::text, $3::text, $4::timestamptz, $5::integer FROM held "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, "
            "metadata = EXCLUDED.metadata, expires_at_turn = EXCLUDED.expires_at_turn"
        ),
        "delete": f"DELETE FROM {table} WHERE key = $1",
        "clear": f"DELETE FROM {table}",
        "lock_table": f"LOCK TABLE {table} IN EXCLUSIVE MODE",
    }


__all__ = [
    "TABLE_NAME",
    "PostgresStore",
    "asyncpg_module",
    "close_pool",
    "driver_errors",
    "lock_id",
    "open_pool",
    "store_call",
    "store_name",
]

"""SqliteStore: a store in one SQLite database file, atomic across the processes of one machine.

All database work happens on one worker thread per store, which owns the connection: calls are
queued in order, the event loop never blocks, and sqlite3's one-thread-per-connection rule holds
without ``check_same_thread=False``. Every check-then-write runs inside ``BEGIN IMMEDIATE``,
which takes SQLite's write lock before the first read, so no other connection (in this process
or another) can write between a check and the writes it guards. WAL lets readers go on while
one process writes; ``busy_timeout`` makes a writer wait for the lock instead of failing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar, cast

from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.stores.base import Expect, Put, Remove
from oma_actors.stores.conditional import AppliesConditionally
from oma_actors.stores.database import DatabaseStore
from oma_actors.stores.prefix import upper_bound
from oma_actors.stores.rows import (
    encode_batch,
    encode_metadata,
    encode_time,
    make_row_entry,
    refusing_lone_surrogates,
)

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Mapping, Sequence

    from oma_actors.clock import Clock
    from oma_actors.stores.base import MemoryEntry, Write

_T = TypeVar("_T")

SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of a database this build writes; a newer one is refused."""

TABLE = "oma_kv"
"""The table the store keeps its entries in (the one the schema below creates)."""

# seq gives list() its insertion order: an upsert keeps the row (and so its seq), a deleted and
# re-inserted key gets a new one, and AUTOINCREMENT never hands out a number twice.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS oma_kv (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    value TEXT NOT NULL,
    metadata TEXT,
    created_at TEXT NOT NULL,
    expires_at_turn INTEGER
)
"""
_UPSERT = (
    "INSERT INTO oma_kv (key, value, metadata, created_at, expires_at_turn) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
    "metadata = excluded.metadata, expires_at_turn = excluded.expires_at_turn"
)
_VALUE = "SELECT value FROM oma_kv WHERE key = ?"
_ROW = "SELECT key, value, metadata, created_at, expires_at_turn FROM oma_kv"


class SqliteStore(DatabaseStore[ThreadPoolExecutor], AppliesConditionally):
    """A store in one SQLite file (stdlib ``sqlite3``, WAL), shared safely by many processes.

    ``compare_and_set`` and ``apply`` are atomic across every process on the machine that opens
    the same file. It satisfies ``ConditionalStore`` (so ``AtomicStore``) and ``ExpiringStore``;
    ``list()`` keeps insertion order and an overwrite keeps its position and ``created_at``.
    Use ``async with SqliteStore(path) as store``: it opens eagerly and closes on exit. A store
    used without ``async with`` opens on first use; then call ``aclose()``.

    Args:
        path: The database file; its directory is created on open.
        clock: Stamps ``created_at`` of new keys.
        busy_timeout: Seconds a write waits for another process's write lock before failing.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock = SYSTEM_CLOCK,
        busy_timeout: float = 30.0,
    ) -> None:
        self._path = os.path.abspath(os.fspath(path))
        super().__init__(self._path)
        self._clock = clock
        self._busy_timeout = busy_timeout
        self._connection: sqlite3.Connection | None = None

    @property
    def path(self) -> str:
        """The absolute path of the database file."""
        return self._path

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key``, or ``None`` when there is none."""

        def read(connection: sqlite3.Connection) -> MemoryEntry | None:
            row = connection.execute(f"{_ROW} WHERE key = ?", (key,)).fetchone()
            return None if row is None else self._entry(row)

        return await self._run(read)

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        """Apply ``writes`` in order, in one ``BEGIN IMMEDIATE`` transaction, if every check holds.

        Returns:
            ``True`` if every check held and the writes committed, ``False`` on a mismatch
            (nothing written).

        Raises:
            StoreError: A ``Put``'s metadata is not JSON-serializable (nothing written), a key
                or value holds a lone surrogate (named; the transaction rolled back), or the
                database failed (the transaction rolled back).
        """
        batch = encode_batch(writes)
        now = encode_time(self._clock.now())

        def body(connection: sqlite3.Connection) -> bool:
            for check in checks:
                row = connection.execute(_VALUE, (check.key,)).fetchone()
                if (row[0] if row is not None else None) != check.value:
                    return False
            for write, metadata in batch:
                if isinstance(write, Put):
                    connection.execute(_UPSERT, (write.key, write.value, metadata, now, None))
                else:
                    connection.execute("DELETE FROM oma_kv WHERE key = ?", (write.key,))
            return True

        with refusing_lone_surrogates(self._path, checks, writes):
            return await self._run(lambda connection: immediate_transaction(connection, body))

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return every entry in insertion order; with ``prefix``, only keys that start with it.

        A prefix is a range scan on the key's index (``key >= prefix AND key < bound``, in
        SQLite's byte order), never a ``LIKE``: the prefix's own ``%`` and ``_`` stay text.
        """
        query, args = _range(prefix)

        def read(connection: sqlite3.Connection) -> builtins.list[MemoryEntry]:
            rows = connection.execute(f"{_ROW}{query} ORDER BY seq", args).fetchall()
            return [self._entry(row) for row in rows]

        return await self._run(read)

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is a no-op."""
        with refusing_lone_surrogates(self._path, (), (Remove(key),)):
            await self._run(lambda c: c.execute("DELETE FROM oma_kv WHERE key = ?", (key,)))

    async def clear(self) -> None:
        """Remove every entry."""
        await self._run(lambda connection: connection.execute("DELETE FROM oma_kv"))

    async def _upsert(
        self, key: str, value: str, metadata: Mapping[str, Any] | None, expires: int | None
    ) -> None:
        row = (key, value, encode_metadata(metadata, key), encode_time(self._clock.now()), expires)
        with refusing_lone_surrogates(self._path, (), (Put(key, value),)):
            await self._run(lambda connection: connection.execute(_UPSERT, row))

    def _entry(self, row: tuple[Any, ...]) -> MemoryEntry:
        return make_row_entry(self._path, *row)

    async def _run(self, call: Callable[[sqlite3.Connection], _T]) -> _T:
        worker = await self._connected()
        # A cancelled caller does not stop a call already running: the worker finishes its
        # transaction (commit or rollback), so the database is never left half-written.
        return await asyncio.get_running_loop().run_in_executor(
            worker, self._guarded, call, self._connection
        )

    async def _connect(self) -> ThreadPoolExecutor:
        """The worker thread, once it opened the file (and made the table if needed)."""
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oma-sqlite")
        opening = worker.submit(self._guarded, self._open_connection, None)
        try:
            self._connection = await asyncio.shield(asyncio.wrap_future(opening))
        except BaseException:
            # Failed (nothing is open) or cancelled (the open goes on): whatever it opened is
            # closed on its own thread, after it, and this worker is given up.
            worker.submit(_close_opened, opening)
            worker.shutdown(wait=False)
            raise
        return worker

    async def _disconnect(self, handle: ThreadPoolExecutor) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            # Queued behind every pending call, so those finish (and commit) before the close.
            await asyncio.get_running_loop().run_in_executor(handle, connection.close)
        handle.shutdown(wait=False)

    def _guarded(
        self, call: Callable[[sqlite3.Connection], _T], connection: sqlite3.Connection | None
    ) -> _T:
        """``call(connection)`` on the worker, a sqlite3 failure raised as a typed error."""
        try:
            return call(cast("sqlite3.Connection", connection))
        except (sqlite3.Error, OSError, ValueError, OverflowError) as exc:
            raise store_error(self._path, exc) from exc

    def _open_connection(self, _: object) -> sqlite3.Connection:
        return connect(self._path, self._busy_timeout, lambda c: immediate_transaction(c, _migrate))


def _close_opened(opening: Future[sqlite3.Connection]) -> None:
    """Close what an abandoned open made (it ran before this, on the same worker)."""
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


def _range(prefix: str | None) -> tuple[str, tuple[str, ...]]:
    """The ``WHERE`` clause (with its arguments) of the keys that start with ``prefix``."""
    if not prefix:
        return "", ()
    bound = upper_bound(prefix)
    if bound is None:
        return " WHERE key >= ?", (prefix,)
    return " WHERE key >= ? AND key < ?", (prefix, bound)


def _migrate(connection: sqlite3.Connection) -> None:
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise sqlite3.OperationalError(
            f"the database has schema version {version}; this build reads up to {SCHEMA_VERSION}"
        )
    connection.execute(_SCHEMA)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def store_error(path: str, exc: Exception, what: str = "") -> StoreError:
    """The typed error of a failed SQLite call on ``path`` (``what``: which table, if any)."""
    if isinstance(exc, sqlite3.DatabaseError) and getattr(exc, "sqlite_errorname", None) in (
        "SQLITE_NOTADB",
        "SQLITE_CORRUPT",
    ):
        return CorruptStoreError(path, f"not a usable SQLite database ({exc})")
    return StoreError(f"{path}: {what}{exc}")


def connect(
    path: str, busy_timeout: float, prepare: Callable[[sqlite3.Connection], object]
) -> sqlite3.Connection:
    """A connection to the database file ``path`` (created 0600), in WAL mode with full sync,
    after ``prepare`` (its tables) ran on it; closed again if anything failed."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # Create the database 0600 (it holds conversations and tool results); SQLite gives its
    # -wal and -shm files the database file's permissions. O_EXCL: only a file that did not
    # exist is opened (and closed) here. Closing any descriptor of an existing database drops
    # every POSIX lock this process holds on it, also those of its other connections (a store
    # and its journal share the file): another process then takes itself for the last one,
    # checkpoints and deletes the WAL under them, and the database is corrupted.
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    # isolation_level=None: no implicit transactions, so BEGIN IMMEDIATE is ours to issue.
    connection = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")  # a commit survives a power cut
        prepare(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def immediate_transaction(
    connection: sqlite3.Connection, body: Callable[[sqlite3.Connection], _T]
) -> _T:
    """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction: committed, or rolled back on error."""
    # IMMEDIATE takes the write lock now, before the checks read anything: a DEFERRED
    # transaction would read under a shared lock and could lose the upgrade race to a writer.
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = body(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result


__all__ = ["SCHEMA_VERSION", "SqliteStore", "connect", "immediate_transaction", "store_error"]

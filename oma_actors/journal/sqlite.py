"""``SqliteRunJournal``: a run journal in the SQLite database of a ``SqliteStore`` (D15).

As ``SqliteStore`` does, all database work runs on one worker thread that owns the connection
(WAL, ``synchronous = FULL``), so the event loop never blocks. A batch is one ``BEGIN
IMMEDIATE`` transaction: SQLite's write lock is taken before the fence checks read the store's
table, so no other connection (a new lease owner in another process) can write between a check
and the rows it guards. The rows of every append go in with one ``executemany``; when a key is
already stored, that is rolled back and each append is redone in its own savepoint, so a
duplicate key refuses that append alone.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from oma_actors.journal.sql import NO_LAST, SqlRunJournal, checked_keys, fence_holds
from oma_actors.stores.sqlite import (
    TABLE,
    SqliteStore,
    connect,
    immediate_transaction,
    store_error,
)

if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Sequence

    from oma_actors.journal.sql import AppendPart, PartResult

_T = TypeVar("_T")

STORE_TABLE = TABLE
"""The table of ``SqliteStore``, where the run records the fence checks read live."""

JOURNAL_TABLE = f"{STORE_TABLE}_journal"
"""The journal's table, beside the store's."""

MARKS_TABLE = f"{JOURNAL_TABLE}_marks"
"""The journal's dispatch marks (``marks``), beside its events."""


class SqliteRunJournal(SqlRunJournal):
    """A run journal in a SQLite file, one row per event; see the module docstring.

    Opens lazily: nothing is touched before the first append or read.

    Args:
        path: the database file (the store's, for fenced appends); created on first use.
        flush_interval_ms: the batching window opened by the first pending append.
        busy_timeout: seconds a batch waits for another connection's write lock.
        redact: extra patterns for RedactingStore's rules, applied to each event's payload at
            write time, as ``JsonlRunJournal`` takes them (``None`` writes events unredacted).

    Raises:
        ConfigurationError: a ``redact`` pattern is invalid.
    """

    kind = "SqliteRunJournal"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_interval_ms: float = 0,
        busy_timeout: float = 30.0,
        redact: Sequence[str | re.Pattern[str]] | None = None,
    ) -> None:
        self._path = os.path.abspath(os.fspath(path))
        super().__init__(
            self._path, JOURNAL_TABLE, flush_interval_ms=flush_interval_ms, redact=redact
        )
        self._busy_timeout = busy_timeout
        self._connection: sqlite3.Connection | None = None
        self._worker: ThreadPoolExecutor | None = None
        self._insert = f"INSERT INTO {JOURNAL_TABLE} (run_id, seq, payload) VALUES (?, ?, ?)"

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def shares_database(self, store: object) -> bool:
        """Whether ``store`` is a ``SqliteStore`` of this very file."""
        return isinstance(store, SqliteStore) and store.path == self._path

    async def _transact(
        self, parts: Sequence[AppendPart], results: list[PartResult | None]
    ) -> None:
        def body(connection: sqlite3.Connection) -> None:
            current: dict[str, str | None] = {}
            for key in checked_keys(parts, results):
                row = connection.execute(
                    f"SELECT value FROM {STORE_TABLE} WHERE key = ?", (key,)
                ).fetchone()
                current[key] = None if row is None else row[0]
            going = []
            for index, part in enumerate(parts):
                if results[index] is not None:
                    continue
                if not fence_holds(part, current):
                    results[index] = False
                    continue
                going.append(index)
            if self._insert_all(connection, [parts[index] for index in going]):
                for index in going:
                    results[index] = True
                return
            for index in going:  # some row is stored already: find whose, append by append
                results[index] = self._insert_part(connection, parts[index])

        await self._run(lambda connection: immediate_transaction(connection, body))

    def _insert_all(self, connection: sqlite3.Connection, parts: Sequence[AppendPart]) -> bool:
        """Every part's rows with one ``executemany`` (the common case: no row stored yet).

        ``False``: a row is refused; nothing of this call is kept (its savepoint is rolled back).
        """
        rows = [(row.run_id, row.seq, row.payload) for part in parts for row in part.rows]
        connection.execute("SAVEPOINT batch")
        try:
            connection.executemany(self._insert, rows)
        except sqlite3.IntegrityError:
            connection.execute("ROLLBACK TO batch")
            connection.execute("RELEASE batch")
            return False
        connection.execute("RELEASE batch")
        return True

    def _insert_part(self, connection: sqlite3.Connection, part: AppendPart) -> PartResult:
        rows = [(row.run_id, row.seq, row.payload) for row in part.rows]
        connection.execute("SAVEPOINT part")
        try:
            connection.executemany(self._insert, rows)
        except sqlite3.IntegrityError:
            connection.execute("ROLLBACK TO part")
            connection.execute("RELEASE part")
            for run_id, seq, _ in rows:
                found = connection.execute(
                    f"SELECT 1 FROM {JOURNAL_TABLE} WHERE run_id = ? AND seq = ?", (run_id, seq)
                ).fetchone()
                if found is not None:
                    return self.duplicate(run_id, seq)
            raise  # not a stored key: the database refused for another reason, fail the batch
        connection.execute("RELEASE part")
        return True

    async def _select(
        self, run_id: str | None, seq: int, last: int | None = None
    ) -> Sequence[tuple[str, int, str]]:
        self._check_open()
        columns = f"SELECT run_id, seq, payload FROM {JOURNAL_TABLE}"
        args: tuple[object, ...]
        if run_id is None:
            query, args = f"{columns} WHERE seq >= ? ORDER BY seq, run_id", (seq,)
        else:
            query = f"{columns} WHERE run_id = ? AND seq BETWEEN ? AND ? ORDER BY seq"
            args = (run_id, seq, NO_LAST if last is None else last)
        return await self._run(lambda connection: connection.execute(query, args).fetchall())

    async def _delete(self, run_id: str) -> int:
        query = f"DELETE FROM {JOURNAL_TABLE} WHERE run_id = ?"

        def body(connection: sqlite3.Connection) -> int:
            count: int = connection.execute(query, (run_id,)).rowcount
            connection.execute(f"DELETE FROM {MARKS_TABLE} WHERE run_id = ?", (run_id,))
            return count

        return await self._run(lambda connection: immediate_transaction(connection, body))

    async def _insert_mark(self, run_id: str, seq: int, call_id: str, payload: str) -> None:
        query = (
            f"INSERT OR REPLACE INTO {MARKS_TABLE} (run_id, seq, call_id, payload) "
            "VALUES (?, ?, ?, ?)"
        )

        def body(connection: sqlite3.Connection) -> None:
            connection.execute(query, (run_id, seq, call_id, payload))

        await self._run(lambda connection: immediate_transaction(connection, body))

    async def _select_marks(self, run_id: str, above: int) -> Sequence[tuple[int, str, str]]:
        query = (
            f"SELECT seq, call_id, payload FROM {MARKS_TABLE} WHERE run_id = ? AND seq > ? "
            "ORDER BY seq"
        )
        rows = await self._run(
            lambda connection: connection.execute(query, (run_id, above)).fetchall()
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def _release(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        # Queued behind every pending call, so those finish (and commit) before the close.
        await asyncio.get_running_loop().run_in_executor(worker, self._close_connection)
        worker.shutdown(wait=False)

    async def _run(self, call: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oma-journal")
        # A cancelled caller does not stop a call already running: the worker finishes its
        # transaction (commit or rollback), so the database is never left half-written.
        return await asyncio.get_running_loop().run_in_executor(self._worker, self._on_worker, call)

    def _on_worker(self, call: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            return call(self._connection or self._connect())
        except (sqlite3.Error, OSError, ValueError, OverflowError) as exc:
            raise store_error(self._path, exc, "journal: ") from exc

    def _connect(self) -> sqlite3.Connection:
        self._connection = connect(self._path, self._busy_timeout, _create_table)
        return self._connection

    def _close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _create_table(connection: sqlite3.Connection) -> None:
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {JOURNAL_TABLE} (run_id TEXT NOT NULL, "
        "seq INTEGER NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (run_id, seq))"
    )
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {MARKS_TABLE} (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "call_id TEXT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (run_id, seq, call_id))"
    )


__all__ = ["JOURNAL_TABLE", "MARKS_TABLE", "STORE_TABLE", "SqliteRunJournal"]

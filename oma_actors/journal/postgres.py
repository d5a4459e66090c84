"""``PostgresRunJournal``: a run journal in the PostgreSQL database of a ``PostgresStore`` (D15).

A batch is one transaction, and in the common case ONE autocommit statement (one round trip
however many runs share the batch): the rows of every append, from ``unnest(...)`` arrays. With
fence checks the same statement first takes the store's own advisory lock of each record key,
in the store's global order, then reads the records ``FOR UPDATE`` (which returns a record's
newest committed version, a takeover that committed while the statement waited included), and
inserts only the rows of the appends whose checks hold: a ``PostgresStore.apply`` of a new owner
serializes with the batch exactly as with another ``apply``. A row already stored fails that
statement whole (nothing of it is stored); the batch is then redone in a transaction whose
``ON CONFLICT DO NOTHING RETURNING`` shows which appends conflict: the transaction is rolled
back, those appends get ``JournalDuplicateError``, and the rest is committed without them.

**One pool and one set of batches per database.** Every ``PostgresRunJournal`` of one DSN and
store table on one event loop shares them (``_Database``): one asyncpg pool, and one
``GroupCommit`` per batching window, so appends of every run of the process share batches
however many journals the runs opened (``open_journal(uri)`` per run). The share is made by
the first journal that appends or reads, counted, and closed when the last journal using it
closes: a journal's ``close()`` commits and waits for its own appends, never closes what an open
journal still uses. (The counted share of ``stores.uri._shared_file_store``, registered weakly
as ``FileStore`` registers its instances: a journal dropped unclosed frees its share.)

**The bound.** For their journals, a process opens at most ``max_connections`` (of the journal
that made the share; default 4) connections per DSN, store table and event loop, plus one per
``listen()`` under way. A share replacing one still closing connects only once that one's pool
is closed, so the two never add up.

asyncpg is imported on first use (the ``postgres`` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import TYPE_CHECKING, Any

from oma_actors.errors import ConfigurationError, StoreError
from oma_actors.journal.batching import GroupCommit
from oma_actors.journal.errors import JournalClosedError, JournalDuplicateError
from oma_actors.journal.sql import (
    NO_LAST,
    SqlRunJournal,
    checked_keys,
    commit_batch,
    fence_holds,
)
from oma_actors.stores.postgres import (
    TABLE_NAME,
    PostgresStore,
    asyncpg_module,
    close_pool,
    driver_errors,
    lock_id,
    open_pool,
    store_call,
    store_name,
)

if TYPE_CHECKING:
    import re
    from collections.abc import Awaitable, Callable, Sequence

    import asyncpg

    from oma_actors.journal.sql import AppendPart, PartResult

JOURNAL_SUFFIX = "_journal"
"""The journal of the store table ``T`` is the table ``T_journal``."""


class _Conflict(Exception):
    """Rows of some appends were already stored: roll the batch back and retry without them."""


class PostgresRunJournal(SqlRunJournal):
    """A run journal in a PostgreSQL table beside a store's table; see the module docstring.

    Connects lazily, on the first append or read, and creates its table if it is missing. Its
    connections and batches are those of every journal of the same DSN and store table on the
    running event loop (the module docstring's share); the base class's own ``GroupCommit`` is
    not used.

    Args:
        dsn: a ``postgresql://user[:password]@host[:port]/database`` URI.
        store_table: the store's table (``open_store``'s ``?table=``); the journal's table is
            ``<store_table>_journal``, and fence checks read the run records in ``store_table``.
        flush_interval_ms: the batching window opened by the first pending append; journals
            with the same window share its batches.
        max_connections: the most connections the shared pool opens (the first journal's
            value, when the pool is made; a later journal joining it does not change it).
        connect_timeout: seconds to wait for the server before failing (the first journal's).
        redact: extra patterns for RedactingStore's rules, applied to each event's payload at
            write time, as ``JsonlRunJournal`` takes them (``None`` writes events unredacted).
            The journal's own: a journal sharing its batches encodes its rows its own way.

    Raises:
        ConfigurationError: ``store_table`` is not a plain identifier, or a ``redact``
            pattern is invalid.
    """

    kind = "PostgresRunJournal"

    def __init__(
        self,
        dsn: str,
        *,
        store_table: str = "oma_kv",
        flush_interval_ms: float = 0,
        max_connections: int = 4,
        connect_timeout: float = 10.0,
        redact: Sequence[str | re.Pattern[str]] | None = None,
    ) -> None:
        if not TABLE_NAME.fullmatch(store_table):
            raise ConfigurationError(
                f"PostgresRunJournal store_table {store_table!r} is not a plain identifier"
            )
        table = f"{store_table}{JOURNAL_SUFFIX}"
        super().__init__(
            store_name(dsn, table), table, flush_interval_ms=flush_interval_ms, redact=redact
        )
        self._dsn = dsn
        self._store_table = store_table
        self._store_name = store_name(dsn, store_table)
        self._max_connections = max_connections
        self._connect_timeout = connect_timeout
        self._share: _Database | None = None
        self._joined: _Database | None = None  # the share it joined, kept after the close
        # This journal's appends not yet committed: close() waits for them, and only them.
        self._pending: set[asyncio.Future[bool]] = set()

    @property
    def channel(self) -> str:
        """The notification channel: a run's id is sent on it when its rows commit."""
        return self.table

    @property
    def batches(self) -> int:
        """Transactions committed or attempted so far (one per batch) by the batches this
        journal shares with every journal of its database and table."""
        return 0 if self._joined is None else self._joined.batches

    async def listen(self, callback: Callable[[str], None]) -> Callable[[], Awaitable[None]]:
        """Call ``callback(run_id)`` whenever rows of ``run_id`` commit (LISTEN/NOTIFY).

        Holds one connection of its own (not the pool's) until the returned ``stop`` is
        awaited. A notification is a wake-up, not data: the reader then reads the rows.

        Raises:
            StoreError: the server could not be reached.
        """
        driver = asyncpg_module()
        connection = await self._call(driver.connect(self._dsn, timeout=self._connect_timeout))

        def notified(_connection: object, _pid: int, _channel: str, payload: str) -> None:
            callback(payload)

        try:
            await self._call(connection.add_listener(self.channel, notified))
        except BaseException:
            await connection.close()
            raise

        async def stop() -> None:
            try:
                with contextlib.suppress(*driver_errors(driver, OSError)):
                    await connection.remove_listener(self.channel, notified)
            finally:
                await connection.close()

        return stop

    def shares_database(self, store: object) -> bool:
        """Whether ``store`` is a ``PostgresStore`` of this DSN's database and this store table."""
        return isinstance(store, PostgresStore) and store.name == self._store_name

    async def close(self) -> None:
        """Commit this journal's queued appends now, wait for them, and leave the shared pool
        and batches: the last journal of the database to leave closes them.

        Later appends and reads raise ``JournalClosedError``. A cancelled close leaves the share
        at once (the last journal cutting its batches short: their appends' futures are
        cancelled), then the cancellation propagates.
        """
        self._closed = True
        share, pending = self._share, set(self._pending)
        try:
            if share is not None and pending:
                share.group(self._window_s).flush()
                await asyncio.wait(pending)
        except BaseException:
            await self._release(abort=True)
            raise
        await self._release()

    def _enqueue(self, part: AppendPart, *, now: bool) -> asyncio.Future[bool]:
        future = self._database().group(self._window_s).enqueue(part, now=now)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return future

    async def _transact(
        self, parts: Sequence[AppendPart], results: list[PartResult | None]
    ) -> None:
        await self._database().transact(parts, results)

    async def _select(
        self, run_id: str | None, seq: int, last: int | None = None
    ) -> Sequence[tuple[str, int, str]]:
        return await self._database().select(run_id, seq, last)

    async def _delete(self, run_id: str) -> int:
        return await self._database().delete(run_id)

    async def _insert_mark(self, run_id: str, seq: int, call_id: str, payload: str) -> None:
        await self._database().insert_mark(run_id, seq, call_id, payload)

    async def _select_marks(self, run_id: str, above: int) -> Sequence[tuple[int, str, str]]:
        return await self._database().select_marks(run_id, above)

    async def _release(self, *, abort: bool = False) -> None:
        share, self._share = self._share, None
        if share is not None:
            await share.leave(abort=abort)

    async def _call(self, operation: Awaitable[Any]) -> Any:
        return await store_call(self._name, operation)

    def _database(self) -> _Database:
        """The share of this journal's database on the running loop, joined on first use.

        Raises:
            JournalClosedError: the journal was closed.
            StoreError: the journal is used on another event loop than the one it joined on.
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        share = self._share
        if share is not None:
            if share.loop is not loop:
                raise StoreError(
                    f"{self._name}: the journal is used on another event loop than its first"
                )
            return share
        key = (loop, self._dsn, self._store_table)
        share = _SHARES.get(key)
        if share is None or share.leaving:
            # None yet, or its last journal is closing it: a new one, connecting after it closed.
            share = _Database(
                loop,
                self._name,
                self._dsn,
                self._store_table,
                max_connections=self._max_connections,
                connect_timeout=self._connect_timeout,
                previous=share,
            )
            _SHARES[key] = share
        share.users += 1
        self._share = self._joined = share
        return share


class _Database:
    """The pool and batches every open journal of one DSN and store table on ``loop`` shares.

    ``users`` journals joined it and have not closed yet; the last to ``leave`` commits what is
    queued, closes the pool and unregisters it (see the module docstring).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        name: str,
        dsn: str,
        store_table: str,
        *,
        max_connections: int,
        connect_timeout: float,
        previous: _Database | None,
    ) -> None:
        self.loop = loop
        self.name = name
        self.users = 0
        self._dsn = dsn
        self._store_table = store_table
        self._channel = f"{store_table}{JOURNAL_SUFFIX}"
        self._sql = _statements(self._channel, store_table)
        self._max_connections = max_connections
        self._connect_timeout = connect_timeout
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()
        self._groups: dict[float, GroupCommit[AppendPart, bool]] = {}
        self._previous = previous
        self._leaving = False
        self._released = False
        self._closed = asyncio.Event()

    @property
    def leaving(self) -> bool:
        """Whether its last journal left: it is closing, and a new journal needs a new share."""
        return self._leaving

    @property
    def batches(self) -> int:
        """Batches committed or attempted so far, over every window."""
        return sum(group.batches for group in self._groups.values())

    def group(self, window_s: float) -> GroupCommit[AppendPart, bool]:
        """The batches of the journals whose window is ``window_s``."""
        group = self._groups.get(window_s)
        if group is None:
            group = self._groups[window_s] = GroupCommit(self._commit, window_s=window_s)
        return group

    async def leave(self, *, abort: bool = False) -> None:
        """One journal closed; the last one commits what is still queued (with ``abort``, or
        when cancelled meanwhile, cuts the batches short instead) and closes the pool."""
        self.users -= 1
        if self.users > 0:
            return
        self._leaving = True
        try:
            if not abort:
                for group in list(self._groups.values()):
                    await group.drain()
        finally:
            try:
                for group in list(self._groups.values()):
                    await group.abort()  # after a drain: nothing left to cut short
            finally:
                await self._close()

    async def _close(self) -> None:
        # Set first: an open under way (holding ``_opening``) then closes what it opened.
        self._released = True
        try:
            async with self._opening:
                pool, self._pool = self._pool, None
                if pool is not None:
                    await _close_pool(pool)
        finally:
            key = (self.loop, self._dsn, self._store_table)
            if _SHARES.get(key) is self:
                del _SHARES[key]
            self._closed.set()

    async def connected(self) -> asyncpg.Pool:
        """The pool, opened (and the tables created) by the first caller.

        Raises:
            JournalClosedError: every journal of the share closed.
            StoreError: the server is unreachable or refused the connection (``open_pool``).
        """
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                if self._released:
                    raise JournalClosedError(f"{self.name}: the journal is closed")
                if self._previous is not None:
                    # The share this one replaces is still closing: its connections go first.
                    await self._previous._closed.wait()
                    self._previous = None
                pool = await open_pool(
                    self._dsn,
                    self.name,
                    (self._sql["create"], self._sql["create_marks"]),
                    max_size=self._max_connections,
                    connect_timeout=self._connect_timeout,
                )
                if self._released:  # the last journal left while this opened
                    await _close_pool(pool)
                    raise JournalClosedError(f"{self.name}: the journal is closed")
                self._pool = pool
            return self._pool

    def duplicate(self, run_id: str, seq: int) -> JournalDuplicateError:
        """The error of an append whose ``(run_id, seq)`` is already stored."""
        return JournalDuplicateError(self.name, run_id, seq)

    async def _commit(self, parts: Sequence[AppendPart]) -> list[PartResult]:
        return await commit_batch(parts, self.transact, self.duplicate)

    async def transact(self, parts: Sequence[AppendPart], results: list[PartResult | None]) -> None:
        """``SqlRunJournal._transact``: commit the pending parts in one transaction."""
        pool = await self.connected()
        try:
            await self._call(self._one_statement(pool, parts, results))
            return
        except _Conflict:
            pass  # some row is stored already: find which append it is, in a transaction
        while True:
            try:
                await self._call(self._attempt(pool, parts, results))
            except _Conflict:
                continue  # the appends that conflicted now have their error: the rest again
            return

    async def _one_statement(
        self, pool: asyncpg.Pool, parts: Sequence[AppendPart], results: list[PartResult | None]
    ) -> None:
        """The common case in ONE round trip: lock, check and insert as one autocommit statement.

        Raises ``_Conflict`` (nothing was stored: the statement failed whole) when a row exists.
        """
        pending = [i for i, result in enumerate(results) if result is None]
        keys = checked_keys(parts, results)
        locks = sorted({lock_id(self._store_table, key) for key in keys})
        check_parts, check_keys, check_values = [], [], []
        row_parts, run_ids, seqs, payloads = [], [], [], []
        for index in pending:
            for check in parts[index].checks:
                check_parts.append(index)
                check_keys.append(check.key)
                check_values.append(check.value)
            for row in parts[index].rows:
                row_parts.append(index)
                run_ids.append(row.run_id)
                seqs.append(row.seq)
                payloads.append(row.payload)
        try:
            async with pool.acquire() as connection:
                if not keys:  # no fence: the rows alone (the store's table may not even exist)
                    await connection.execute(
                        self._sql["plain"], run_ids, seqs, payloads, self._channel
                    )
                    failing = None
                else:
                    args = (run_ids, seqs, payloads, row_parts, locks, keys)
                    failing = await connection.fetchval(
                        self._sql["batch"], *args, check_parts, check_keys, check_values,
                        self._channel,
                    )  # fmt: skip
        except asyncpg_module().UniqueViolationError:
            raise _Conflict from None
        refused = set(failing or ())
        for index in pending:
            results[index] = index not in refused

    async def _attempt(
        self, pool: asyncpg.Pool, parts: Sequence[AppendPart], results: list[PartResult | None]
    ) -> None:
        answers = list(results)
        async with pool.acquire() as connection, connection.transaction():
            keys = checked_keys(parts, answers)
            current: dict[str, str | None] = {}
            if keys:
                # The store's lock of each key, in its global (sorted) order: no deadlock with
                # a store apply, and a takeover's record write waits for this transaction.
                locks = sorted({lock_id(self._store_table, key) for key in keys})
                await connection.executemany(
                    "SELECT pg_advisory_xact_lock($1)", [(i,) for i in locks]
                )
                records = await connection.fetch(self._sql["check"], keys)
                current = {record[0]: record[1] for record in records}
            run_ids: list[str] = []
            seqs: list[int] = []
            payloads: list[str] = []
            for index, part in enumerate(parts):
                if answers[index] is not None:
                    continue
                if not fence_holds(part, current):
                    answers[index] = False
                    continue
                answers[index] = True
                for row in part.rows:
                    run_ids.append(row.run_id)
                    seqs.append(row.seq)
                    payloads.append(row.payload)
            if run_ids:
                stored = await connection.fetch(
                    self._sql["insert"], run_ids, seqs, payloads, self._channel
                )
                if len(stored) != len(run_ids):
                    inserted = {(row[0], row[1]) for row in stored}
                    for index, part in enumerate(parts):
                        missing = [r for r in part.rows if (r.run_id, r.seq) not in inserted]
                        if answers[index] is True and missing:
                            results[index] = self.duplicate(missing[0].run_id, missing[0].seq)
                    raise _Conflict  # rolls the transaction back
        results[:] = answers

    async def select(
        self, run_id: str | None, seq: int, last: int | None = None
    ) -> Sequence[tuple[str, int, str]]:
        """``SqlRunJournal._select``."""
        pool = await self.connected()
        if run_id is None:
            rows = await self._call(pool.fetch(self._sql["all"], seq))
        else:
            end = NO_LAST if last is None else last
            rows = await self._call(pool.fetch(self._sql["run"], run_id, seq, end))
        return [(row[0], row[1], row[2]) for row in rows]

    async def delete(self, run_id: str) -> int:
        """``SqlRunJournal._delete``."""
        pool = await self.connected()

        async def both() -> str:
            # One transaction: a run's marks never outlive its rows (a restore would read the
            # next run of that id as damaged).
            async with pool.acquire() as connection, connection.transaction():
                status: str = await connection.execute(self._sql["delete"], run_id)
                await connection.execute(self._sql["delete_marks"], run_id)
                return status

        status = await self._call(both())
        return int(status.rsplit(" ", 1)[-1])  # "DELETE <n>"

    async def insert_mark(self, run_id: str, seq: int, call_id: str, payload: str) -> None:
        """``SqlRunJournal._insert_mark``."""
        pool = await self.connected()
        await self._call(pool.execute(self._sql["mark"], run_id, seq, call_id, payload))

    async def select_marks(self, run_id: str, above: int) -> Sequence[tuple[int, str, str]]:
        """``SqlRunJournal._select_marks``."""
        pool = await self.connected()
        rows = await self._call(pool.fetch(self._sql["marks"], run_id, above))
        return [(row[0], row[1], row[2]) for row in rows]

    async def _call(self, operation: Awaitable[Any]) -> Any:
        return await store_call(self.name, operation)


_SHARES: weakref.WeakValueDictionary[tuple[asyncio.AbstractEventLoop, str, str], _Database] = (
    weakref.WeakValueDictionary()
)
"""The live share of each (loop, DSN, store table); weak, so a share no journal holds goes."""


async def _close_pool(pool: asyncpg.Pool) -> None:
    """``close_pool``; a close cut short (cancelled) terminates the pool: no connection stays."""
    try:
        await close_pool(pool)
    except BaseException:
        pool.terminate()
        raise


def _statements(table: str, store_table: str) -> dict[str, str]:
    """The statements of the journal table ``table`` beside the store table ``store_table``."""
    quoted, store = f'"{table}"', f'"{store_table}"'
    marks = f'"{table}_marks"'
    return {
        "create": (
            f"CREATE TABLE IF NOT EXISTS {quoted} (run_id TEXT NOT NULL, seq BIGINT NOT NULL, "
            "payload TEXT NOT NULL, PRIMARY KEY (run_id, seq))"
        ),
        # The notification of each run with new rows is sent at the commit (PostgreSQL
        # sends one per distinct payload in a transaction): a reader following a run
        # (``listen``) wakes then, never before its rows are visible.
        "insert": (
            f"WITH stored AS (INSERT INTO {quoted} (run_id, seq, payload) "
            "SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[]) "
            "ON CONFLICT DO NOTHING RETURNING run_id, seq) "
            "SELECT run_id, seq, pg_notify($4, run_id) FROM stored"
        ),
        "delete": f"DELETE FROM {quoted} WHERE run_id = $1",
        "create_marks": (
            f"CREATE TABLE IF NOT EXISTS {marks} (run_id TEXT NOT NULL, seq BIGINT NOT NULL, "
            "call_id TEXT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (run_id, seq, call_id))"
        ),
        "mark": (
            f"INSERT INTO {marks} (run_id, seq, call_id, payload) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (run_id, seq, call_id) DO UPDATE SET payload = EXCLUDED.payload"
        ),
        "marks": (
            f"SELECT seq, call_id, payload FROM {marks} WHERE run_id = $1 AND seq > $2 ORDER BY seq"
        ),
        "delete_marks": f"DELETE FROM {marks} WHERE run_id = $1",
        "check": f"SELECT key, value FROM {store} WHERE key = ANY($1::text[]) FOR UPDATE",
        "plain": (
            f"WITH stored AS (INSERT INTO {quoted} (run_id, seq, payload) "
            "SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[]) RETURNING run_id) "
            "SELECT count(pg_notify($4, run_id)) FROM (SELECT DISTINCT run_id FROM stored) r"
        ),
        # One autocommit statement (its own transaction). The store's advisory locks come
        # first, in its global order (the sorted subquery feeds the aggregate in order), as a
        # one-time filter gating the record read, so they are held before any row is read;
        # FOR UPDATE then reads each record's newest committed version. An append whose
        # checks fail inserts nothing; any stored row fails the statement whole.
        "batch": (
            "WITH locked AS MATERIALIZED (SELECT count(pg_advisory_xact_lock(id)) AS n "
            "FROM (SELECT unnest($5::bigint[]) AS id ORDER BY 1) AS ids), "
            f"current AS MATERIALIZED (SELECT key, value FROM {store} "
            "WHERE (SELECT n FROM locked) >= 0 AND key = ANY($6::text[]) FOR UPDATE), "
            "failing AS MATERIALIZED (SELECT DISTINCT c.part FROM "
            "unnest($7::int[], $8::text[], $9::text[]) AS c(part, key, value) "
            "LEFT JOIN current ON current.key = c.key "
            "WHERE current.value IS DISTINCT FROM c.value), "
            f"inserted AS (INSERT INTO {quoted} (run_id, seq, payload) "
            "SELECT r.run_id, r.seq, r.payload FROM "
            "unnest($1::text[], $2::bigint[], $3::text[], $4::int[]) "
            "AS r(run_id, seq, payload, part) "
            "WHERE r.part NOT IN (SELECT part FROM failing) RETURNING run_id), "
            "notified AS MATERIALIZED (SELECT count(pg_notify($10, run_id)) AS n "
            "FROM (SELECT DISTINCT run_id FROM inserted) AS r) "
            "SELECT array_agg(part) FROM failing WHERE (SELECT n FROM notified) >= 0"
        ),
        "all": f"SELECT run_id, seq, payload FROM {quoted} WHERE seq >= $1 ORDER BY seq, run_id",
        "run": (
            f"SELECT run_id, seq, payload FROM {quoted} WHERE run_id = $1 "
            "AND seq BETWEEN $2 AND $3 ORDER BY seq"
        ),
    }


__all__ = ["JOURNAL_SUFFIX", "TABLE_NAME", "PostgresRunJournal"]

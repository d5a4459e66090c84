"""Per-backend hooks of the journal contract: counting commits, breaking one, corrupting a row.

Each hook looks at or breaks the real backend (an fsync, SQLite's own statements, PostgreSQL's
transaction ids), never a timer: the contract counts, it does not time.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg

from oma_actors.journal import JsonlRunJournal, PostgresRunJournal, SqliteRunJournal
from oma_actors.journal.sqlite import JOURNAL_TABLE
from oma_actors.testing.journal_contract import JournalHooks

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import pytest

    from oma_actors.journal import RunJournal


def jsonl_hooks(monkeypatch: pytest.MonkeyPatch) -> JournalHooks:
    """Counts and breaks the JSONL journal's fsyncs (one per batch)."""
    real = os.fsync
    state = {"fsyncs": 0, "break": False}

    def fsync(fd: int) -> None:
        state["fsyncs"] += 1
        if state["break"]:
            state["break"] = False
            raise OSError(5, "injected fsync failure")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)

    async def break_next(journal: RunJournal) -> None:
        state["break"] = True

    def rewrite(journal: RunJournal, run_id: str, seq: int) -> None:
        assert isinstance(journal, JsonlRunJournal)
        path = Path(journal.path)
        needle = f'"seq":{seq},'
        lines = [
            "{garbage" if needle in line and run_id in line else line
            for line in path.read_text(encoding="utf-8").splitlines()
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    async def corrupt(journal: RunJournal, run_id: str, seq: int) -> None:
        await asyncio.to_thread(rewrite, journal, run_id, seq)

    return JournalHooks(
        reopen=lambda j: JsonlRunJournal(j.path),  # type: ignore[attr-defined]
        commits=lambda j: int(state["fsyncs"]),
        break_next_commit=break_next,
        corrupt=corrupt,
    )


class _CommitFailsOnce:
    """A SQLite connection whose next ``COMMIT`` fails (the transaction then rolls back)."""

    def __init__(self, inner: sqlite3.Connection) -> None:
        self._inner = inner
        self.armed = True

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.armed:
            self.armed = False
            raise sqlite3.OperationalError("injected commit failure")
        return self._inner.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def sqlite_hooks() -> JournalHooks:
    """Counts the ``COMMIT`` statements SQLite runs; breaks one; rewrites a payload."""
    commits: dict[int, int] = {}

    async def count(journal: RunJournal) -> int:
        assert isinstance(journal, SqliteRunJournal)
        if id(journal) not in commits:
            commits[id(journal)] = 0

            def trace(statement: str) -> None:
                if statement == "COMMIT":
                    commits[id(journal)] += 1

            # On the worker thread that owns the connection (sqlite3's rule).
            await journal._run(lambda connection: connection.set_trace_callback(trace))
        return commits[id(journal)]

    async def break_next(journal: RunJournal) -> None:
        assert isinstance(journal, SqliteRunJournal)
        assert journal._connection is not None
        journal._connection = _CommitFailsOnce(journal._connection)  # type: ignore[assignment]

    async def corrupt(journal: RunJournal, run_id: str, seq: int) -> None:
        assert isinstance(journal, SqliteRunJournal)
        with sqlite3.connect(journal.path) as connection:
            connection.execute(
                f"UPDATE {JOURNAL_TABLE} SET payload = ? WHERE run_id = ? AND seq = ?",
                ('{"type":"turn/start","seq":', run_id, seq),
            )

    return JournalHooks(
        keyed=True,
        reopen=lambda j: SqliteRunJournal(j.path),  # type: ignore[attr-defined]
        commits=count,
        break_next_commit=break_next,
        corrupt=corrupt,
    )


def postgres_hooks(
    dsn: str, store_table: str
) -> tuple[JournalHooks, Callable[[], Awaitable[None]]]:
    """Counts the transactions that inserted rows (distinct ``xmin``); breaks the next commit
    with a deferred constraint trigger (it raises AT commit); rewrites a payload.

    Returns the hooks and a cleanup (the trigger's function outlives the dropped table).
    """
    table = f"{store_table}_journal"

    async def sql(statement: str, *args: Any) -> Any:
        connection = await asyncpg.connect(dsn)
        try:
            return await connection.fetchval(statement, *args)
        finally:
            await connection.close()

    async def commits(journal: RunJournal) -> int:
        return int(await sql(f'SELECT count(DISTINCT xmin::text) FROM "{table}"'))

    async def break_next(journal: RunJournal) -> None:
        # Owned by a column of the table: dropped with it.
        await sql(f'CREATE SEQUENCE IF NOT EXISTS "{table}_fault" OWNED BY "{table}".seq')
        await sql(f"SELECT setval('\"{table}_fault\"', 1, false)")
        await sql(
            f'CREATE OR REPLACE FUNCTION "{table}_fail"() RETURNS trigger AS $$ BEGIN '
            f"IF nextval('\"{table}_fault\"') = 1 THEN "
            "RAISE EXCEPTION 'injected commit failure'; END IF; RETURN NULL; END $$ "
            "LANGUAGE plpgsql"
        )
        await sql(
            f'CREATE CONSTRAINT TRIGGER "{table}_fail" AFTER INSERT ON "{table}" '
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
            f'EXECUTE FUNCTION "{table}_fail"()'
        )

    async def corrupt(journal: RunJournal, run_id: str, seq: int) -> None:
        await sql(
            f'UPDATE "{table}" SET payload = $1 WHERE run_id = $2 AND seq = $3',
            "not json at all",
            run_id,
            seq,
        )

    async def cleanup() -> None:
        await sql(f'DROP FUNCTION IF EXISTS "{table}_fail"() CASCADE')

    hooks = JournalHooks(
        keyed=True,
        reopen=lambda j: PostgresRunJournal(dsn, store_table=store_table),
        commits=commits,
        break_next_commit=break_next,
        corrupt=corrupt,
    )
    return hooks, cleanup

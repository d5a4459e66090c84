"""What the sidecar needs of a database journal beyond the contract: deleting one run's events,
and on PostgreSQL a wake-up when a run's rows commit (LISTEN/NOTIFY), never before."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING

import pytest

from oma_actors.errors import StoreError
from oma_actors.journal import JournalDuplicateError, PostgresRunJournal, SqliteRunJournal
from oma_actors.journal.marks import DispatchMark
from oma_actors.journal.sqlite import JOURNAL_TABLE
from oma_actors.testing.journal_contract import events

if TYPE_CHECKING:
    from pathlib import Path

    from service_kit import FreshStores

    from oma_actors.journal.sql import SqlRunJournal


async def _deletes_one_run(journal: SqlRunJournal) -> None:
    await journal.append([*events("a", [1, 2, 3]), *events("b", [1, 2])])
    for run_id in ("a", "b"):
        await journal.mark(
            DispatchMark(run_id=run_id, seq=2, task_id="t", agent_name="x", call_id="c")
        )
    assert await journal.delete_run("a") == 3
    assert await journal.read_run("a") == []
    assert await journal.marks_of("a") == []  # its marks go with its rows
    assert [e.seq for e in await journal.read_run("b")] == [1, 2]
    assert [m.seq for m in await journal.marks_of("b")] == [2]
    assert await journal.delete_run("a") == 0
    await journal.append(events("a", [1]))  # a new run of that id starts clean
    assert [e.seq for e in await journal.read_run("a")] == [1]


async def test_sqlite_journal_deletes_one_run(tmp_path: Path) -> None:
    journal = SqliteRunJournal(tmp_path / "state.db")
    try:
        await _deletes_one_run(journal)
    finally:
        await journal.close()


async def test_postgres_journal_deletes_one_run(fresh_stores: FreshStores) -> None:
    dsn, table = fresh_stores.postgres_table()
    journal = PostgresRunJournal(dsn, store_table=table)
    try:
        await _deletes_one_run(journal)
    finally:
        await journal.close()


async def test_postgres_journal_wakes_a_listener_when_rows_commit(
    fresh_stores: FreshStores,
) -> None:
    dsn, table = fresh_stores.postgres_table()
    journal = PostgresRunJournal(dsn, store_table=table)
    woken: asyncio.Queue[str] = asyncio.Queue()
    seen_rows: list[int] = []

    def wake(run_id: str) -> None:
        woken.put_nowait(run_id)

    try:
        await journal.read_run("a")  # creates the table
        stop = await journal.listen(wake)
        try:
            await journal.append([*events("a", [1, 2]), *events("b", [1])])
            got = {await asyncio.wait_for(woken.get(), 10) for _ in range(2)}
            assert got == {"a", "b"}
            # The wake-up came after the commit: the rows are there to read.
            seen_rows = [e.seq for e in await journal.read_run("a")]
            # An append refused as a duplicate commits nothing and wakes nobody; the next
            # real append's wake-up is the next one the listener gets.
            with pytest.raises(JournalDuplicateError):
                await journal.append(events("a", [2]))
            await journal.append(events("c", [1]))
            assert await asyncio.wait_for(woken.get(), 10) == "c"
        finally:
            await stop()
    finally:
        await journal.close()
    assert seen_rows == [1, 2]


async def test_sqlite_journal_fails_a_batch_the_database_refuses_for_another_reason(
    tmp_path: Path,
) -> None:
    """A row refused by something other than a stored key (here a trigger; a CHECK or a
    full disk's constraint alike) fails the append that carries it: it is never counted as
    appended, nor taken for a duplicate, and the rows beside it in its batch are not kept."""
    path = tmp_path / "state.db"
    journal = SqliteRunJournal(path)
    try:
        await journal.append(events("a", [1]))  # creates the table
        with sqlite3.connect(path) as connection:
            connection.execute(
                f"CREATE TRIGGER refuse BEFORE INSERT ON {JOURNAL_TABLE}"
                " WHEN NEW.seq = 3 BEGIN SELECT RAISE(ABORT, 'refused by policy'); END"
            )
        with pytest.raises(StoreError, match="refused by policy"):
            await journal.append(events("a", [2, 3]))
        assert [e.seq for e in await journal.read_run("a")] == [1]
        # The journal goes on: a later append the database accepts lands.
        await journal.append(events("a", [2]))
        assert [e.seq for e in await journal.read_run("a")] == [1, 2]
    finally:
        await journal.close()

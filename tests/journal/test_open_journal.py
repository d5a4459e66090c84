"""``open_journal(uri)``: the URIs of ``open_store``, and the database journals' own rules (D15)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import asyncpg
import pytest
from service_kit import FreshStores

from oma_actors import ConfigurationError, open_journal, open_store
from oma_actors.journal import (
    InMemoryRunJournal,
    JournalCorruptError,
    JsonlRunJournal,
    PostgresRunJournal,
    SqliteRunJournal,
)
from oma_actors.journal.open import journal_beside
from oma_actors.journal.sqlite import JOURNAL_TABLE
from oma_actors.journal.tail import read_journal_tail
from oma_actors.stores import InMemoryStore
from oma_actors.stores.postgres import PostgresStore
from oma_actors.stores.sqlite import SqliteStore
from oma_actors.testing.journal_contract import event, events


def test_each_scheme_opens_its_journal(tmp_path: Path) -> None:
    assert isinstance(open_journal("memory://"), InMemoryRunJournal)
    jsonl = open_journal(f"file://{tmp_path}/run.jsonl")
    assert isinstance(jsonl, JsonlRunJournal)
    assert jsonl.path == f"{tmp_path}/run.jsonl"
    bare = open_journal(str(tmp_path / "x" / ".." / "run.jsonl"))
    assert isinstance(bare, JsonlRunJournal)
    assert bare.path == jsonl.path  # one spelling of one file, as open_store resolves it
    sqlite = open_journal(f"sqlite://{tmp_path}/state.db")
    assert isinstance(sqlite, SqliteRunJournal)
    assert sqlite.path == f"{tmp_path}/state.db"
    for uri in (
        "postgresql://u:secret@db:5432/app?table=runs",
        "postgres://u:secret@db/app?table=runs",
    ):
        pg = open_journal(uri)
        assert isinstance(pg, PostgresRunJournal)
        assert pg.table == "runs_journal"
    assert open_journal("postgresql://u@db/app").table == "oma_kv_journal"  # type: ignore[attr-defined]


def test_describe_names_the_same_database_never_a_dsn() -> None:
    pg = open_journal("postgresql://user:hunter2@db:5432/app?table=runs")
    assert pg.describe() == {
        "kind": "PostgresRunJournal", "store": "same-database", "table": "runs_journal"
    }  # fmt: skip
    assert "hunter2" not in json.dumps(pg.describe())
    sqlite = open_journal("sqlite:///var/state.db")
    assert sqlite.describe() == {
        "kind": "SqliteRunJournal", "store": "same-database", "table": "oma_kv_journal"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("uri", "match"),
    [
        ("ftp://host/x", "unknown store URI scheme 'ftp'"),
        ("redis://localhost:6379/0", "keeps no run journal"),
        ("postgresql://u:pw@db/app?table=bad-name", "not a plain name"),
        ("sqlite://relative.db", "must be local"),
        ("", "empty store URI"),
    ],
)
def test_a_bad_uri_is_a_configuration_error(uri: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as caught:
        open_journal(uri)
    assert "pw" not in str(caught.value).replace("postgresql", "")


async def test_the_sqlite_journal_lives_in_the_stores_database(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path}/state.db"
    journal = open_journal(uri)
    async with open_store(uri) as store:
        await store.set("k", "v")
        await journal.append(events("r", [1, 2]))
        assert [e.seq for e in await journal.read_from(0)] == [1, 2]
        assert (await store.get("k")).value == "v"  # type: ignore[union-attr]
    await journal.close()
    with sqlite3.connect(tmp_path / "state.db") as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    assert {"oma_kv", JOURNAL_TABLE} <= tables
    assert mode == "wal"


async def test_a_row_whose_payload_names_another_event_is_corrupt(tmp_path: Path) -> None:
    journal = SqliteRunJournal(tmp_path / "state.db")
    await journal.append(events("r", [1, 2]))
    with sqlite3.connect(tmp_path / "state.db") as connection:  # a swapped row
        payload = connection.execute(
            f"SELECT payload FROM {JOURNAL_TABLE} WHERE seq = 2"
        ).fetchone()[0]
        connection.execute(f"UPDATE {JOURNAL_TABLE} SET payload = ? WHERE seq = 1", (payload,))
    with pytest.raises(
        JournalCorruptError, match=r"run 'r' seq 1: .*key: the payload is run 'r' seq 2"
    ):
        await journal.read_run("r")
    await journal.close()


async def test_a_postgres_journal_row_that_does_not_parse_names_run_and_seq(
    fresh_stores: FreshStores,
) -> None:
    dsn, table = fresh_stores.postgres_table()
    journal = PostgresRunJournal(dsn, store_table=table)
    await journal.append(events("r", [1, 2, 3]))
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(
            f'UPDATE "{table}_journal" SET payload = $1 WHERE seq = 2', '{"type":"turn/st'
        )
    finally:
        await connection.close()
    with pytest.raises(JournalCorruptError, match="run 'r' seq 2") as caught:
        await journal.read_from(0)
    assert caught.value.line == 2
    await journal.close()


class _CountingReads(SqliteRunJournal):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.calls: list[str] = []

    async def read_from(self, seq: int) -> list:  # type: ignore[type-arg]
        self.calls.append("read_from")
        return await super().read_from(seq)

    async def read_run(self, run_id: str, seq: int = 0) -> list:  # type: ignore[type-arg]
        self.calls.append("read_run")
        return await super().read_run(run_id, seq)


async def test_a_snapshots_tail_is_read_by_the_indexed_run_query(tmp_path: Path) -> None:
    from oma_actors.domain.snapshot import CheckpointSnapshot

    journal = _CountingReads(tmp_path / "state.db")
    await journal.append([event("other", 5), event("mine", 4), event("mine", 5), event("mine", 6)])
    snapshot = CheckpointSnapshot(
        version=5, mode="runTasks", run_id="mine", attempt=1, revision=1,
        created_at="2026-09-01T00:00:00.000Z", tasks=(), journal_watermark_seq=4,
    )  # fmt: skip
    tail = await read_journal_tail(journal, snapshot)
    assert [(e.run_id, e.seq) for e in tail] == [("mine", 5), ("mine", 6)]
    assert journal.calls == ["read_run"]
    await journal.close()


async def test_a_cancelled_appender_is_cancelled_alone(tmp_path: Path) -> None:
    journal = SqliteRunJournal(tmp_path / "state.db")
    await journal.append(events("warm", [1]))
    first = asyncio.create_task(journal.append(events("a", [1])))
    second = asyncio.create_task(journal.append(events("b", [1])))
    await asyncio.sleep(0)  # both are in the open batch
    first.cancel()
    await second  # its batch is not cancelled with the other appender
    with pytest.raises(asyncio.CancelledError):
        await first
    stored = {(e.run_id, e.seq) for e in await journal.read_from(0)}
    assert ("b", 1) in stored
    await journal.close()


def test_the_journal_beside_a_database_store_is_in_its_own_database(tmp_path: Path) -> None:
    # Opened lazily: nothing connects here. Without it a run on PostgreSQL kept no journal.
    beside = journal_beside(PostgresStore("postgresql://u@127.0.0.1:1/db", table="runs"))
    assert isinstance(beside, PostgresRunJournal)
    assert beside.describe()["store"] == "same-database"
    assert isinstance(journal_beside(SqliteStore(tmp_path / "s.db")), SqliteRunJournal)
    assert journal_beside(InMemoryStore()) is None

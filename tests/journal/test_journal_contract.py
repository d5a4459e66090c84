"""Every journal backend runs one contract (``oma_actors.testing.journal_contract``, D15).

Memory, JSONL, SQLite and PostgreSQL; commits are counted on the backend itself (fsyncs,
SQLite's COMMIT statements, PostgreSQL's inserting transaction ids), failures are injected into
the real commit, and ``test_contract_catches_*`` show the contract fails a journal that breaks it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import pytest
from journal_kit import jsonl_hooks, postgres_hooks, sqlite_hooks

from oma_actors.journal import (
    InMemoryRunJournal,
    JsonlRunJournal,
    PostgresRunJournal,
    SqliteRunJournal,
)
from oma_actors.testing.journal_contract import JournalHooks, check_run_journal

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from service_kit import FreshStores

    from oma_actors.journal import JournalEvent


async def test_memory_journal_keeps_the_contract() -> None:
    await check_run_journal(InMemoryRunJournal)


async def test_jsonl_journal_keeps_the_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await check_run_journal(
        lambda: JsonlRunJournal(tmp_path / f"{uuid.uuid4().hex}.jsonl"), jsonl_hooks(monkeypatch)
    )


async def test_sqlite_journal_keeps_the_contract(tmp_path: Path) -> None:
    await check_run_journal(
        lambda: SqliteRunJournal(tmp_path / uuid.uuid4().hex / "state.db"), sqlite_hooks()
    )


async def test_postgres_journal_keeps_the_contract(fresh_stores: FreshStores) -> None:
    tables: list[str] = []
    cleanups = []

    def make() -> PostgresRunJournal:
        dsn, table = fresh_stores.postgres_table()
        tables.append(table)
        return PostgresRunJournal(dsn, store_table=table)

    # One table per check: the hooks of the journal just made are looked up by its table.
    class PerTable:
        def __init__(self) -> None:
            self.hooks: dict[str, JournalHooks] = {}

        def of(self, journal: object) -> JournalHooks:
            assert isinstance(journal, PostgresRunJournal)
            store_table = journal.table.removesuffix("_journal")
            if store_table not in self.hooks:
                dsn = fresh_stores.postgres_table(store_table)[0]
                hooks, cleanup = postgres_hooks(dsn, store_table)
                self.hooks[store_table] = hooks
                cleanups.append(cleanup)
            return self.hooks[store_table]

    per = PerTable()
    hooks = JournalHooks(
        keyed=True,
        reopen=lambda j: per.of(j).reopen(j),  # type: ignore[misc]
        commits=lambda j: per.of(j).commits(j),  # type: ignore[misc]
        break_next_commit=lambda j: per.of(j).break_next_commit(j),  # type: ignore[misc]
        corrupt=lambda j, r, s: per.of(j).corrupt(j, r, s),  # type: ignore[misc]
    )
    try:
        await check_run_journal(make, hooks)
    finally:
        for cleanup in cleanups:
            await cleanup()


# --- the contract catches what it states ----------------------------------------------------


class _PerEventCommits(SqliteRunJournal):
    """Commits each append alone: no group commit."""

    async def _commit(self, parts: Sequence[object]) -> list[object]:  # type: ignore[override]
        results: list[object] = []
        for part in parts:
            results.extend(await super()._commit([part]))  # type: ignore[list-item]
        return results


class _Overwrites(InMemoryRunJournal):
    """Takes a duplicate (run_id, seq) silently."""


async def test_contract_catches_a_journal_without_group_commit(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="concurrent_runs_share_commits"):
        await check_run_journal(
            lambda: _PerEventCommits(tmp_path / uuid.uuid4().hex / "state.db"), sqlite_hooks()
        )


async def test_contract_catches_a_journal_taking_duplicates() -> None:
    with pytest.raises(AssertionError, match="duplicate_is_refused"):
        await check_run_journal(_Overwrites, JournalHooks(keyed=True))


class _RefusesOnClose(InMemoryRunJournal):
    """Refuses an append that was waiting when close() came, instead of finishing it."""

    async def append(self, events: Sequence[JournalEvent]) -> None:
        await asyncio.sleep(0)
        await super().append(events)


async def test_contract_catches_a_journal_refusing_accepted_appends_on_close() -> None:
    with pytest.raises(AssertionError, match="accepted before close"):
        await check_run_journal(_RefusesOnClose)

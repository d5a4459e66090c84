"""Fenced appends of a sealed journal (D15 with encryption at rest).

A leased run on an ``EncryptingStore`` over SQLite or PostgreSQL, with an ``EncryptingJournal``
over the journal in the same database, is journal-first as an unsealed one: its appends carry
the lease's record check, restated on the sealed record the database holds. After a takeover
not one event of the old owner lands.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from test_journal_fenced import ledger, modes, run_leased

from oma_actors.errors import LeaseError
from oma_actors.journal import (
    EncryptingJournal,
    JournalAppendError,
    PostgresRunJournal,
    SqliteRunJournal,
    verify_run,
)
from oma_actors.stores import EncryptingStore, KeyRing
from oma_actors.testing import FakeClock
from oma_actors.testing.journal_contract import events

if TYPE_CHECKING:
    from service_kit import FreshStores

RING = KeyRing({"k1": bytes(range(32))}, active="k1")

Sealed = tuple[EncryptingStore, EncryptingJournal]


@pytest.fixture(params=["sqlite", "postgres"])
async def sealed(request: pytest.FixtureRequest, tmp_path: Path, fresh_stores: FreshStores) -> Any:
    """A sealed store and the sealed journal in its database."""
    if request.param == "sqlite":
        inner: Any = await fresh_stores.sqlite(tmp_path / "state.db")
        journal: Any = SqliteRunJournal(tmp_path / "state.db")
    else:
        dsn, table = fresh_stores.postgres_table()
        inner = await fresh_stores.postgres(table)
        journal = PostgresRunJournal(dsn, store_table=table)
    sealed_journal = EncryptingJournal(journal, RING)
    try:
        yield EncryptingStore(inner, RING), sealed_journal
    finally:
        await sealed_journal.close()


async def test_a_sealed_journal_shares_only_its_sealed_stores_database(
    sealed: Sealed, tmp_path: Path, fresh_stores: FreshStores
) -> None:
    store, journal = sealed
    assert journal.shares_database(store)
    assert not journal.shares_database(store.inner)  # the record would be read sealed
    other = EncryptingStore(await fresh_stores.sqlite(tmp_path / "other.db"), RING)
    assert not journal.shares_database(other)
    assert not EncryptingJournal(SqliteRunJournal(tmp_path / "j.db"), RING).shares_database(None)


async def test_a_stale_owners_sealed_append_is_refused(sealed: Sealed) -> None:
    store, journal = sealed
    clock = FakeClock()
    old = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)  # type: ignore[arg-type]
    await journal.append_fenced(events("run-1", [1, 2]), old)
    clock.advance(5)
    new = await ledger(store, clock, "b").acquire("run-1", heartbeat=False)  # type: ignore[arg-type]
    with pytest.raises(LeaseError) as caught:
        await journal.append_fenced(events("run-1", [3]), old)
    assert caught.value.code == "RUN_LEASE_LOST"
    assert [e.seq for e in await journal.read_run("run-1")] == [1, 2]
    await journal.append_fenced(events("run-1", [3]), new)
    stored = await journal.read_run("run-1")
    assert [e.seq for e in stored] == [1, 2, 3]
    assert stored[-1].data == events("run-1", [3])[0].data  # sealed, and opens as appended
    raw = await journal.inner.read_run("run-1")
    assert all(set(e.data) == {"sealed"} for e in raw)


async def test_a_sealed_append_under_an_unsealed_stores_fence_is_refused(
    sealed: Sealed, tmp_path: Path, fresh_stores: FreshStores
) -> None:
    _, journal = sealed
    plain = await fresh_stores.sqlite(tmp_path / "plain.db")
    handle = await ledger(plain, FakeClock(), "a").acquire("run-1", heartbeat=False)
    with pytest.raises(JournalAppendError, match="sealed store"):
        await journal.append_fenced(events("run-1", [1]), handle)
    assert await journal.read_from(0) == []


async def test_a_sealed_leased_run_is_journal_first(sealed: Sealed) -> None:
    store, journal = sealed
    result, progress = await run_leased(store, journal, "leased")  # type: ignore[arg-type]
    assert result.success
    assert modes(progress) == {"snapshot", "journal"}  # per-turn boundaries are fenced appends
    assert (await verify_run(journal)).ok

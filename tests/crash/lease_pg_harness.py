"""The lease crash world on PostgreSQL: the run's store, record and journal in one database.

``PgWorld`` is ``lease_harness.World`` with its store in a fresh PostgreSQL table (and the run
journal beside it, ``<table>_journal``) instead of a SQLite file. Each worker connects with its
name as ``application_name``, so the parent can SIGSTOP a worker only while none of its
connections is inside a transaction (a stalled holder, not one that blocks everybody on a lock).
The parent reads the database as a third party with asyncpg.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from crash_scenarios import RUN_ID
from lease_harness import RUN_KEY, T0, TTL, WAIT, Worker, World, _wait_state
from service_kit import unique


class PgWorld(World):
    """One run on a PostgreSQL table: workers, the lease clock, the store and its journal."""

    def __init__(self, root: Path, dsn: str) -> None:
        self.root = root
        self.dsn = dsn
        self.table = unique("oma_lease_")
        self.db = root / "unused.sqlite"  # the child's required --db; --store overrides it
        self.ledger = root / "ledger"
        self.clock = root / "clock"
        self.ledger.mkdir(parents=True)
        self.workers: list[Worker] = []
        self.set_clock(T0)

    def store_uri(self, owner: str) -> str:
        """The store URI of worker ``owner`` (its name as ``application_name``)."""
        return f"{self.dsn}?table={self.table}&application_name=lease-{owner}"

    def spawn(self, owner: str, *options: str, mode: str = "run", ttl: float = TTL) -> Worker:
        """A worker on this world's PostgreSQL table (see ``World.spawn``)."""
        return super().spawn(owner, "--store", self.store_uri(owner), *options, mode=mode, ttl=ttl)

    def stop(self, worker: Worker) -> None:
        """SIGSTOP ``worker`` at a moment none of its connections holds a lock.

        A worker paused with its event loop blocked may be stopped between a batch's ``BEGIN``
        and its first statement: it is then in a transaction that holds nothing, so the
        takeover goes ahead, and the batch resumes (and meets the fence) when the worker wakes.
        """
        for _ in range(200):
            os.kill(worker.pid, signal.SIGSTOP)
            _wait_state(worker.pid, "T")
            if self._idle(worker.name):
                return
            os.kill(worker.pid, signal.SIGCONT)
            time.sleep(0.01)
        pytest.fail(f"worker {worker.name} kept holding a lock")

    def _idle(self, owner: str) -> bool:
        held = self._query(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE a.application_name = $1 AND l.locktype <> 'virtualxid' AND l.granted",
            f"lease-{owner}",
        )
        return held[0][0] == 0

    def record(self) -> dict[str, Any] | None:
        """The run record (OMA's JSON), or ``None``."""
        rows = self._query(f'SELECT value FROM "{self.table}" WHERE key = $1', RUN_KEY)
        return None if not rows else dict(json.loads(rows[0][0]))

    def journal_rows(self) -> list[tuple[int, int, str]]:
        """``(seq, attempt, type)`` of every event of the run in the journal table, by seq."""
        rows = self._query(
            f'SELECT seq, payload FROM "{self.table}_journal" WHERE run_id = $1 ORDER BY seq',
            RUN_ID,
        )
        return [(seq, json.loads(p)["attempt"], json.loads(p)["type"]) for seq, p in rows]

    def drop(self) -> None:
        """Drop the store's and the journal's tables."""
        for table in (self.table, f"{self.table}_journal"):
            self._query(f'DROP TABLE IF EXISTS "{table}"')

    def _query(self, sql: str, *args: Any) -> list[Any]:
        async def run() -> list[Any]:
            connection = await asyncpg.connect(self.dsn, timeout=WAIT)
            try:
                return list(await connection.fetch(sql, *args))
            finally:
                await connection.close()

        with contextlib.suppress(asyncpg.UndefinedTableError):
            return asyncio.run(run())
        return []

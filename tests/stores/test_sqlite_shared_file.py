"""A SQLite store and its journal share one database file in one process (D15) without
dropping each other's locks.

POSIX advisory locks belong to a process and a file: closing *any* descriptor of the file drops
them all, also those SQLite's other connections hold. A connection that opened (and closed) the
database file by itself before connecting dropped the store's lock; another process closing its
own connection then took itself for the last one, checkpointed and deleted the WAL under the
open store, and a crash test saw "database disk image is malformed" (C13b on a SQLite journal).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

from oma_actors.journal import SqliteRunJournal
from oma_actors.stores.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

OTHER_PROCESS = (
    "import sqlite3, sys\n"
    "connection = sqlite3.connect(sys.argv[1])\n"
    "connection.execute('SELECT count(*) FROM oma_kv').fetchall()\n"
    "connection.close()\n"
)


async def test_a_journal_opened_beside_a_store_keeps_the_stores_lock(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with SqliteStore(path) as store:
        await store.set("k", "v")
        journal = SqliteRunJournal(path)
        try:
            assert await journal.read_run("r") == []  # its connection opens now, beside the store's
            # Another process opens and closes the database. While this process holds its lock
            # that process is not the last connection: the WAL stays.
            other = await asyncio.create_subprocess_exec(
                sys.executable, "-c", OTHER_PROCESS, str(path)
            )
            assert await other.wait() == 0
            assert (tmp_path / "state.db-wal").exists()
            assert (await store.get("k")).value == "v"  # type: ignore[union-attr]
        finally:
            await journal.close()

"""A SQLite store or journal holds one connection whatever the concurrency, and none once closed.

A guard: a burst of concurrent calls queues on the one worker thread that owns the connection,
so no burst leaves connections (descriptors of the database file) behind.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import TYPE_CHECKING

import pytest

from oma_actors.journal import JournalEvent, SqliteRunJournal
from oma_actors.stores.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="counts descriptors in /proc/self/fd"
)


def descriptors(path: Path) -> int:
    """Open descriptors of the database file and its -wal and -shm files."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            count += 1
    return count


def threads(prefix: str) -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith(prefix))


async def test_a_burst_of_store_calls_leaves_one_connection(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with SqliteStore(path) as store:
        await store.set("k", "v")
        idle, workers = descriptors(path), threads("oma-sqlite")
        assert idle > 0
        await asyncio.gather(*(store.get("k") for _ in range(50)))
        await asyncio.gather(*(store.set(f"k{i}", "v") for i in range(50)))
        await asyncio.gather(*(store.compare_and_set("k", "v", "v") for _ in range(50)))
        assert descriptors(path) == idle
        assert threads("oma-sqlite") <= workers
    assert descriptors(path) == 0


async def test_a_burst_of_journal_calls_leaves_one_connection(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    journal = SqliteRunJournal(path)

    def event(run: int) -> JournalEvent:
        return JournalEvent(
            seq=1, type="turn/start", run_id=f"r{run}", attempt=1, timestamp_unix_ms=1, data={}
        )

    await journal.append([event(0)])
    idle = descriptors(path)
    await asyncio.gather(*(journal.append([event(i)]) for i in range(1, 51)))
    await asyncio.gather(*(journal.read_run(f"r{i}") for i in range(51)))
    assert descriptors(path) == idle
    await journal.close()
    assert descriptors(path) == 0

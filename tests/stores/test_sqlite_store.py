"""SqliteStore beyond the contract: the file it writes, separate connections, bad files."""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest

from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.stores import Expect, Put, SqliteStore
from oma_actors.stores import sqlite as sqlite_module
from oma_actors.stores.sqlite import SCHEMA_VERSION


def _pragma(path: Path, name: str) -> object:
    with sqlite3.connect(path) as connection:
        return connection.execute(f"PRAGMA {name}").fetchone()[0]


async def test_the_database_is_in_wal_mode_with_a_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "state.db"
    async with SqliteStore(path) as store:
        await store.set("k", "v")
    assert await asyncio.to_thread(_pragma, path, "journal_mode") == "wal"
    assert await asyncio.to_thread(_pragma, path, "user_version") == SCHEMA_VERSION


async def test_instances_with_their_own_connections_have_one_cas_winner(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    stores = [SqliteStore(path) for _ in range(4)]
    try:
        await stores[0].set("fence", "v0")
        results = await asyncio.gather(
            *(
                store.apply([Expect("fence", "v0")], [Put("fence", f"v{n}"), Put("by", f"{n}")])
                for n, store in enumerate(stores * 2, start=1)
            )
        )
        assert sum(results) == 1
        fence, by = await stores[3].get("fence"), await stores[2].get("by")
        assert fence is not None
        assert by is not None
        assert fence.value == f"v{by.value}"
    finally:
        for store in stores:
            await store.aclose()


async def test_a_store_used_without_async_with_opens_lazily_and_closes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    await store.set("k", "v")
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await store.get("k")
    async with SqliteStore(tmp_path / "state.db") as reopened:
        entry = await reopened.get("k")
        assert entry is not None
        assert entry.value == "v"


async def test_a_file_that_is_not_a_database_is_corrupt_not_empty(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    await asyncio.to_thread(path.write_bytes, b"this is not a sqlite database" * 100)
    with pytest.raises(CorruptStoreError, match="not a usable SQLite database") as caught:
        async with SqliteStore(path):
            pytest.fail("opened a corrupt database")
    assert str(path) in str(caught.value)
    assert (await asyncio.to_thread(path.read_bytes)).startswith(b"this is not")


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with SqliteStore(path):
        pass

    def bump() -> None:
        with sqlite3.connect(path) as connection:
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")

    await asyncio.to_thread(bump)
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}"):
        await SqliteStore(path).open()


async def test_bad_input_is_a_store_error_and_writes_nothing(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "state.db") as store:
        await store.set("a", "1")
        with pytest.raises(StoreError, match="not JSON-serializable"):
            await store.apply([], [Put("b", "2"), Put("c", "3", {"when": object()})])
        with pytest.raises(StoreError, match="surrogates"):
            await store.apply([], [Put("b", "2"), Put("c", "lone \ud800")])
        assert [entry.key for entry in await store.list()] == ["a"]


async def test_a_cancelled_caller_leaves_a_usable_store(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "state.db") as store:
        writes = [asyncio.ensure_future(store.set(f"k{n}", "v")) for n in range(20)]
        await asyncio.sleep(0)
        writes[5].cancel()
        await asyncio.gather(*writes, return_exceptions=True)
        assert await store.compare_and_set("k0", "v", "w")
        keys = {entry.key for entry in await store.list()}
        assert keys >= {f"k{n}" for n in range(20) if n != 5}


class _Workers(ThreadPoolExecutor):
    """A worker pool that remembers every pool made, what it ran, and whether it was shut down."""

    made: ClassVar[list[_Workers]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ran: list[str] = []
        self.shut = False
        _Workers.made.append(self)

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.ran.append(getattr(fn, "__name__", repr(fn)))
        return super().submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.shut = True
        super().shutdown(wait, cancel_futures=cancel_futures)


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> list[_Workers]:
    """Every worker pool a ``SqliteStore`` makes during the test, in order."""
    monkeypatch.setattr(sqlite_module, "ThreadPoolExecutor", _Workers)
    _Workers.made.clear()
    return _Workers.made


async def _opening(path: Path) -> tuple[SqliteStore, asyncio.Future[SqliteStore]]:
    """A store and its ``open()``, started and waiting on its worker."""
    store = SqliteStore(path)
    opening = asyncio.ensure_future(store.open())
    await asyncio.sleep(0)
    return store, opening


async def test_an_abandoned_open_is_closed_on_its_worker_and_the_store_stays_usable(
    tmp_path: Path, workers: list[_Workers]
) -> None:
    store, opening = await _opening(tmp_path / "state.db")
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    abandoned = workers[0]
    # What the cancelled open made is closed on the thread that made it, and that worker ends.
    assert abandoned.shut
    assert abandoned.ran[-1] == "_close_opened"
    await asyncio.to_thread(abandoned.shutdown)
    await store.set("k", "v")  # a new worker with its own connection
    assert [entry.key for entry in await store.list()] == ["k"]
    await store.aclose()
    assert len(workers) == 2
    assert workers[1].shut


async def test_a_failed_open_gives_up_its_worker_and_a_later_call_tries_again(
    tmp_path: Path, workers: list[_Workers]
) -> None:
    path = tmp_path / "state.db"
    await asyncio.to_thread(path.write_bytes, b"this is not a sqlite database" * 100)
    store = SqliteStore(path)
    with pytest.raises(CorruptStoreError):
        await store.get("k")
    assert workers[0].shut
    await asyncio.to_thread(path.unlink)
    await store.set("k", "v")
    assert (await store.get("k")) is not None
    await store.aclose()


async def test_a_store_closed_while_it_opens_releases_what_the_open_made(
    tmp_path: Path, workers: list[_Workers]
) -> None:
    store, opening = await _opening(tmp_path / "state.db")
    await store.aclose()  # nothing is open yet to close
    with pytest.raises(StoreError, match="closed"):
        await opening
    (worker,) = workers
    assert worker.shut
    assert worker.ran[-1] == "close"  # the connection the open made, closed on its worker

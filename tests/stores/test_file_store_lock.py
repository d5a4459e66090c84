"""D13 in one process: one FileStore per file through open_store, and the lock it holds.

The cross-process half (a second process is refused, the lock dies with its holder) is in
``test_store_races.py``; here a second open file description of the lock file plays the other
process, which is exactly what ``flock`` sees.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.stores import FileStore, file_lock, open_store
from oma_actors.testing import FakeClock


def locked_by_someone(state: Path) -> bool:
    """Whether another open file description could NOT take the state file's lock now."""
    fd = os.open(f"{state}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we took
    return False


async def test_every_spelling_open_at_once_is_one_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path / "link")
    state = tmp_path / "real" / "state.json"
    async with (
        open_store(f"file://{state}") as a,
        open_store(f"file:////{tmp_path}/link/state.json") as b,
        open_store("state.json") as c,
        open_store(f"{tmp_path}/link/../real/state.json") as d,
    ):
        assert a is b is c is d
        assert isinstance(a, FileStore)
        assert a.path == str(state)
        assert locked_by_someone(state)
        assert (await asyncio.to_thread(Path(f"{state}.lock").read_text)).strip() == str(
            os.getpid()
        )
    assert not locked_by_someone(state), "the last user's exit must release the lock"


async def test_concurrent_opens_share_the_instance_being_opened(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/state.json"
    seen: list[object] = []
    entered = asyncio.Barrier(5)

    async def user(n: int) -> None:
        async with open_store(uri) as store:
            seen.append(store)
            await entered.wait()  # everyone is inside at once
            await store.set(f"k{n}", "v")

    await asyncio.gather(*(user(n) for n in range(5)))
    assert len({id(store) for store in seen}) == 1
    async with open_store(uri) as store:
        # One instance per file while it lives (FileStore(path) too); closed, it re-reads.
        assert sorted(entry.key for entry in await store.list()) == [f"k{n}" for n in range(5)]


async def test_the_shared_store_keeps_compare_and_set_atomic_across_spellings(
    tmp_path: Path,
) -> None:
    (tmp_path / "link").symlink_to(tmp_path)
    spellings = [f"file://{tmp_path}/s.json", f"file://{tmp_path}/link/s.json"]
    async with open_store(spellings[0]) as first, open_store(spellings[1]) as second:
        await first.set("approval", "pending")
        results = await asyncio.gather(
            *(
                store.compare_and_set("approval", "pending", f"decision-{n}")
                for n, store in enumerate([first, second] * 4)
            )
        )
        assert sum(results) == 1


async def test_a_failed_open_fails_every_waiter_and_leaves_nothing_open(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    await asyncio.to_thread(state.write_text, "{not json")
    uri = f"file://{state}"

    async def attempt() -> BaseException | None:
        try:
            async with open_store(uri):
                return None
        except CorruptStoreError as exc:
            return exc

    outcomes = await asyncio.gather(*(attempt() for _ in range(3)))
    assert all(isinstance(outcome, CorruptStoreError) for outcome in outcomes)
    assert not locked_by_someone(state)
    await asyncio.to_thread(state.unlink)
    async with open_store(uri) as store:
        await store.set("k", "v")


async def test_file_store_open_locks_and_plain_construction_locks_at_its_first_write(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    plain = FileStore(state)
    await plain.list()
    assert not locked_by_someone(state), "reading takes no lock (oma approvals list beside it)"
    await plain.set("k", "v")
    assert locked_by_someone(state), "FileStore(path) locks like FileStore.open() once it writes"
    await plain.aclose()
    assert not locked_by_someone(state), "aclose() gives the lock back"
    async with FileStore.open(state) as one:
        assert locked_by_someone(state)
        async with FileStore.open(state) as two:  # the same process shares lock and instance
            assert two is one
        assert locked_by_someone(state), "the lock is held until this process's last open exits"
    assert not locked_by_someone(state)


async def test_a_lock_held_elsewhere_refuses_open_with_the_holders_pid(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    fd = os.open(f"{state}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, b"424242\n")
        for opening in (FileStore.open(state), open_store(f"file://{state}")):
            with pytest.raises(StoreError, match=r"in use by another process \(pid 424242\)"):
                async with opening:
                    pytest.fail("opened a file another process holds")
    finally:
        os.close(fd)
    async with open_store(str(state)) as store:
        assert await store.list() == []


async def test_the_first_opener_s_clock_stamps_for_every_user(tmp_path: Path) -> None:
    clock = FakeClock()
    uri = f"file://{tmp_path}/state.json"
    async with open_store(uri, clock=clock) as first, open_store(uri) as second:
        await second.set("k", "v")
        entry = await first.get("k")
        assert entry is not None
        assert entry.created_at == clock.now()


def _slow_lock(
    monkeypatch: pytest.MonkeyPatch, calls: list[str], started: threading.Event | None = None
) -> None:
    """Make creating and locking the lock file take 50 ms (it runs on a worker thread)."""
    real_lock = file_lock._lock

    def slow(path: str, real: str) -> int | None:
        calls.append(real)
        if started is not None:
            started.set()
        time.sleep(0.05)
        return real_lock(path, real)

    monkeypatch.setattr(file_lock, "_lock", slow)


async def test_claims_of_one_file_made_at_once_share_one_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.json"
    calls: list[str] = []
    _slow_lock(monkeypatch, calls)
    holds = await asyncio.gather(*(file_lock.hold_state_file(str(state)) for _ in range(5)))
    assert len(calls) == 1, "the file is locked once for this process, not once per claim"
    assert locked_by_someone(state)
    for hold in holds[:-1]:
        hold.release()
    assert locked_by_someone(state), "held until the process's last claim is released"
    holds[-1].release()
    assert not locked_by_someone(state)


async def test_a_claim_released_twice_counts_once(tmp_path: Path) -> None:
    # A store closed twice (aclose, then its finalizer) must not give back another's claim.
    state = tmp_path / "state.json"
    first = await file_lock.hold_state_file(str(state))
    second = await file_lock.hold_state_file(str(state))
    first.release()
    first.release()
    assert locked_by_someone(state), "the second claim still holds the file"
    second.release()
    assert not locked_by_someone(state)
    second.release()  # after the last claim: nothing left to give back, nothing raised


async def test_a_claim_cancelled_while_it_locks_leaves_the_file_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.json"
    calls: list[str] = []
    started = threading.Event()
    _slow_lock(monkeypatch, calls, started)
    claim = asyncio.ensure_future(file_lock.hold_state_file(str(state)))
    # Cancelled while the worker thread is creating and locking the file.
    assert await asyncio.to_thread(started.wait, 5)
    claim.cancel()
    with pytest.raises(asyncio.CancelledError):
        await claim
    for _ in range(100):  # the thread finishes its lock; the claim gives it back
        await asyncio.sleep(0.01)
        if not file_lock._TURNS:
            break
    await asyncio.sleep(0)
    assert not locked_by_someone(state), "a cancelled claim left the file locked"
    async with FileStore.open(state) as store:
        await store.set("k", "v")


async def test_a_read_failing_under_the_new_lock_gives_it_back_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Just after taking the lock the store reads the file again (another process may have
    # written it since the mirror was read). If that read fails, the write must fail with it
    # and the lock go back: writing the older mirror would erase what the other one wrote.
    state = tmp_path / "state.json"
    store = FileStore(str(state))

    async def unreadable(self: FileStore) -> None:
        raise StoreError(f"{state}: read failed: [Errno 5] Input/output error")

    monkeypatch.setattr(FileStore, "_read_again", unreadable)
    with pytest.raises(StoreError, match="Input/output error"):
        await store.set("k", "v")
    assert not locked_by_someone(state)
    assert not state.exists()
    monkeypatch.undo()
    await store.set("k", "w")  # the next write takes the lock afresh
    assert locked_by_someone(state)
    entry = await store.get("k")
    assert entry is not None
    assert entry.value == "w"
    await store.aclose()

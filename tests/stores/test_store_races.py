"""Real processes racing on one store: no lost update on a database store, refusal on a file.

Every racer is a separate Python process (``race_child.py``) that opens the store through
``open_store``, says ``ready``, and starts incrementing one counter key with a compare-and-set
retry loop only once ALL racers are open, so their increments really interleave (the test also
requires that some compare-and-set lost, i.e. that the race happened).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest
from race_child import REFUSED
from service_kit import FreshStores

from oma_actors.stores import AtomicStore, open_store

CHILD = Path(__file__).with_name("race_child.py")
ROOT = Path(__file__).resolve().parents[2]
RACERS = 4
INCREMENTS = 50


@dataclass
class Racer:
    """A racing child process, open (``ready``) or refused."""

    process: asyncio.subprocess.Process

    async def ready(self) -> bool:
        """Wait until the child opened its store (True) or exited refusing to (False)."""
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 60)
        return line == b"ready\n"

    async def go(self) -> tuple[int, str, str]:
        """Let it race; wait for its exit code, stdout and stderr."""
        out, err = await asyncio.wait_for(self.process.communicate(b"go\n"), 120)
        assert self.process.returncode is not None
        return self.process.returncode, out.decode(), err.decode()


class Racers:
    """Starts racing children; the fixture kills any still running after the test."""

    def __init__(self) -> None:
        self.started: list[Racer] = []

    async def spawn(self, uri: str, key: str = "counter", count: int = INCREMENTS) -> Racer:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHILD),
            uri,
            key,
            str(count),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.started.append(Racer(process))
        return self.started[-1]

    async def race(self, uri: str) -> int:
        """Run RACERS processes to the end; returns the compare-and-sets they lost in total."""
        racers = [await self.spawn(uri) for _ in range(RACERS)]
        for racer in racers:
            if not await racer.ready():
                code, _, err = await racer.go()
                pytest.fail(f"a racer could not open {uri} (exit {code}): {err}")
        conflicts = 0
        for code, out, err in await asyncio.gather(*(racer.go() for racer in racers)):
            assert code == 0, err
            conflicts += int(out.split()[-1])
        return conflicts


@pytest.fixture
async def racers() -> AsyncIterator[Racers]:
    spawned = Racers()
    try:
        yield spawned
    finally:
        for racer in spawned.started:
            if racer.process.returncode is None:
                racer.process.kill()
                await racer.process.communicate()


async def _counter(store: AtomicStore) -> str | None:
    entry = await store.get("counter")
    return entry.value if entry is not None else None


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
async def test_racing_processes_lose_no_update(
    backend: str,
    tmp_path: Path,
    fresh_stores: FreshStores,
    racers: Racers,
    request: pytest.FixtureRequest,
) -> None:
    store: AtomicStore
    if backend == "sqlite":
        uri = f"sqlite://{tmp_path}/race.db"
        async with open_store(uri) as store:
            await store.set("counter", "0")
    elif backend == "postgres":
        store = await fresh_stores.postgres()  # creates the table; dropped after the test
        uri = f"{request.getfixturevalue('postgres_dsn')}?{urlencode({'table': store.table})}"
    else:
        store = await fresh_stores.redis()
        uri = f"{request.getfixturevalue('redis_url')}?{urlencode({'prefix': store.prefix})}"
    conflicts = await racers.race(uri)
    async with open_store(uri) as fresh:
        assert await _counter(fresh) == str(RACERS * INCREMENTS)
    # Without lost compare-and-sets the processes never overlapped and proved nothing.
    assert conflicts > 0


async def test_a_file_store_refuses_every_other_process_instead_of_losing_updates(
    tmp_path: Path, racers: Racers
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    spellings = [
        f"file://{tmp_path}/real/state.json",
        f"file:////{tmp_path}/link/state.json",
        str(tmp_path / "real" / ".." / "link" / "state.json"),
        f"file://localhost{tmp_path}/real/state.json",
    ]
    children = [await racers.spawn(uri) for uri in spellings]
    opened = [child for child in children if await child.ready()]
    assert len(opened) == 1, "exactly one process may hold a FileStore"
    (holder,) = opened
    for racer in children:
        if racer is not holder:
            code, _, err = await racer.go()
            assert code == REFUSED
            assert f"is in use by another process (pid {holder.process.pid})" in err
    code, _, err = await holder.go()
    assert code == 0, err
    async with open_store(spellings[0]) as store:
        assert await _counter(store) == str(INCREMENTS)


async def test_a_process_holding_the_file_refuses_a_child_and_the_lock_dies_with_its_holder(
    tmp_path: Path, racers: Racers
) -> None:
    uri = f"file://{tmp_path}/state.json"
    async with open_store(uri) as store:
        await store.set("counter", "7")
        refused = await racers.spawn(uri)
        assert not await refused.ready()
        code, _, err = await refused.go()
        assert code == REFUSED
        assert f"in use by another process (pid {os.getpid()})" in err
    holder = await racers.spawn(uri)
    assert await holder.ready()
    second = await racers.spawn(uri)
    assert not await second.ready()
    assert (await second.go())[0] == REFUSED
    holder.process.send_signal(signal.SIGKILL)  # no cleanup runs: the kernel drops the flock
    await holder.process.wait()
    third = await racers.spawn(uri, count=1)
    assert await third.ready()
    assert (await third.go())[0] == 0
    async with open_store(uri) as store:
        assert await _counter(store) == "8"

"""Store lifetimes: a store nobody uses is closed beyond a bound, and opened again on its use.

A run's ``checkpoint.store_uri`` may name any new file or SQLite store in the store root. Each
used to be opened once and closed only when the sidecar stopped (with its database journal): a
token holder starting tiny runs, each naming its own store, made the sidecar hold ~5 files and
2 threads per run for its life, until every tenant's calls failed with EMFILE.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import TYPE_CHECKING

import pytest
from sidecar_helpers import TOKEN

import sidecar.journals
import sidecar.stores
from oma_actors import StoreError
from oma_actors.stores import AtomicStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.server import ServerConfig, Sidecar
from sidecar.stores import StoreRegistry, normalize_uri

if TYPE_CHECKING:
    from pathlib import Path

RUNS = 300


def open_fds() -> int:
    """How many files this process has open."""
    return len(os.listdir("/proc/self/fd"))


def sqlite_uri(path: Path) -> str:
    return normalize_uri(f"sqlite://{path}", field="f")


async def settled(stores: StoreRegistry) -> None:
    """Let the registry's closings in the background finish."""
    for _ in range(500):
        await asyncio.sleep(0.01)
        if stores.open_count <= 8:
            return


async def test_the_registry_keeps_a_bounded_number_of_idle_stores_open(tmp_path: Path) -> None:
    fds, threads = open_fds(), threading.active_count()
    async with StoreRegistry(max_idle=8) as stores:
        lent = []
        for index in range(RUNS):
            store = await stores.get(sqlite_uri(tmp_path / f"s{index}.db"))
            await store.set("k", f"v{index}")
            lent.append(store)
        await settled(stores)
        assert stores.open_count <= 8
        # A SQLite store holds 3 files and a thread: 8 idle ones, not 300 of them.
        assert open_fds() - fds <= 8 * 3 + 10
        assert threading.active_count() - threads <= 8 + 4
        # A store closed meanwhile is opened again on its next use, its entries there.
        for index, store in enumerate(lent):
            entry = await store.get("k")
            assert entry is not None
            assert entry.value == f"v{index}"
        await settled(stores)
        assert open_fds() - fds <= 8 * 3 + 10
    assert stores.open_count == 0


async def test_a_store_in_use_stays_open_and_one_instance(tmp_path: Path) -> None:
    held = sqlite_uri(tmp_path / "held.db")
    async with StoreRegistry(max_idle=1) as stores:
        async with stores.lease(held) as store:
            for index in range(5):  # every other store is idle at once: closed beyond one
                await (await stores.get(sqlite_uri(tmp_path / f"o{index}.db"))).set("k", "v")
            async with stores.lease(held) as again:
                assert again is store  # one instance of one file while it is open (D13)
            await store.set("k", "still open")
        lent = await stores.get(held)
        assert lent is await stores.get(held)
        entry = await lent.get("k")
        assert entry is not None
        assert entry.value == "still open"


async def test_a_store_is_opened_again_only_once_its_last_instance_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    close = sidecar.stores._close_quietly

    async def slow_close(entry: sidecar.stores._Opened) -> None:
        await asyncio.sleep(0.2)
        await close(entry)

    monkeypatch.setattr(sidecar.stores, "_close_quietly", slow_close)
    first = sqlite_uri(tmp_path / "first.db")
    async with StoreRegistry(max_idle=0) as stores:
        async with stores.lease(first) as old:
            await old.set("k", "v")
        # Nobody uses it now: it is closing. Opening it again waits for that.
        async with stores.lease(first) as new:
            assert new is not old
            with pytest.raises(StoreError, match="closed"):
                await old.get("k")
            entry = await new.get("k")
            assert entry is not None
            assert entry.value == "v"


async def test_the_state_store_and_memory_stores_are_never_closed(tmp_path: Path) -> None:
    state_uri = normalize_uri(f"file://{tmp_path}/state.json", field="f")
    async with StoreRegistry(max_idle=0) as stores:
        state = await stores.atomic(state_uri)
        memory = await stores.get("memory://kept")
        await memory.set("k", "kept")
        for index in range(4):
            await (await stores.get(sqlite_uri(tmp_path / f"o{index}.db"))).set("k", "v")
        assert await stores.get(state_uri) is state
        assert await stores.get("memory://kept") is memory
        entry = await memory.get("k")  # a memory store's entries live in its instance
        assert entry is not None
        assert entry.value == "kept"
        await state.set("k", "v")


async def test_a_closed_file_store_is_opened_again_with_its_entries(tmp_path: Path) -> None:
    uri = normalize_uri(f"file://{tmp_path}/runs/one.json", field="f")
    async with StoreRegistry(max_idle=0) as stores:
        store = await stores.get(uri)
        assert isinstance(store, AtomicStore)
        assert getattr(store, "one_document", False) is True  # what the checkpoint writer asks
        assert await store.compare_and_set("k", None, "v1")
        await settled(stores)
        assert stores.open_count == 0  # its lock is given back
        assert await store.compare_and_set("k", "v1", "v2")
        entry = await store.get("k")
        assert entry is not None
        assert entry.value == "v2"


async def test_runs_on_their_own_sqlite_stores_hold_a_bounded_number_of_files(
    tmp_path: Path,
) -> None:
    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=f"file://{tmp_path}/state.json",
        heartbeat_s=0.5,
        grace_s=0.1,
    )
    idle = sidecar.stores.MAX_IDLE_STORES + sidecar.journals.MAX_IDLE_JOURNALS
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        await client.ready()
        fds, threads = open_fds(), threading.active_count()
        gate = asyncio.Semaphore(8)

        async def run(index: int) -> None:
            request = pb.StartRunRequest(
                run_id=f"r{index}",
                team=pb.TeamSpec(
                    name="team",
                    agents=[
                        pb.AgentSpec(
                            name="worker",
                            provider="scripted",
                            scripted=pb.ScriptedModel(turns=[pb.ScriptedTurn(text="done")]),
                        )
                    ],
                ),
                tasks=pb.TasksMode(tasks=[pb.TaskSpec(id="t1", title="T", description="Do.")]),
                checkpoint=pb.CheckpointOptions(store_uri=f"sqlite://{tmp_path}/s{index}.db"),
            )
            async with gate:
                await client.start_run(request)
                async for _ in client.watch(f"r{index}"):
                    pass

        await asyncio.gather(*(run(index) for index in range(RUNS)))
        # Each idle store holds 3 files and a thread, its database journal 2 and a thread.
        assert open_fds() - fds <= idle * 3 + 40
        assert threading.active_count() - threads <= idle + 10
        for index in range(RUNS):
            await client.delete_run(f"r{index}")
        assert open_fds() - fds <= idle * 3 + 40
        assert threading.active_count() - threads <= idle + 10

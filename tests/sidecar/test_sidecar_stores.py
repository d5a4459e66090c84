"""Store URIs in the sidecar: the ``open_store`` spellings, one store per file, SQLite runs."""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

import pytest
from sidecar_helpers import ECHO, TOKEN, run_request

from oma_actors import StoreError, open_store
from oma_actors.checkpoint import list_checkpoints
from oma_actors.keyspace import sidecar_key
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.runs import RUN_KIND
from sidecar.server import ServerConfig, Sidecar
from sidecar.status import InvalidArgument
from sidecar.stores import StoreRegistry, check_request_store, normalize_uri

if TYPE_CHECKING:
    from pathlib import Path


def test_every_spelling_of_one_file_is_one_uri(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    canonical = f"file://{tmp_path}/real/state.json"
    for spelling in (
        canonical,
        f"file:////{tmp_path}/real/state.json",
        f"file://{tmp_path}/link/state.json",
        f"file://localhost{tmp_path}/real/../real/state.json",
    ):
        assert normalize_uri(spelling, field="f") == canonical, spelling
    assert normalize_uri(f"sqlite://{tmp_path}/link/x.db", field="f") == (
        f"sqlite://{tmp_path}/real/x.db"
    )
    assert normalize_uri("memory:///shared/", field="f") == "memory://shared"
    pg = "postgresql://oma:secret@db.example:5432/oma?table=runs"
    assert normalize_uri(pg, field="f") == pg  # the password is what connecting needs


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("mysql://h/db", "UNKNOWN_STORE_SCHEME"),
        ("/abs/state.json", "UNKNOWN_STORE_SCHEME"),  # a bare path: relative to what, remotely?
        ("state.json", "UNKNOWN_STORE_SCHEME"),
        ("file://host/state.json", "VALIDATION"),
        ("file:///dir/", "VALIDATION"),
        ("redis://h/not-a-number", "VALIDATION"),
    ],
)
def test_bad_store_uris_name_the_field(uri: str, reason: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        normalize_uri(uri, field="checkpoint.store_uri")
    assert caught.value.reason == reason
    assert caught.value.metadata["field"] == "checkpoint.store_uri"


async def test_the_registry_shares_one_store_per_uri(tmp_path: Path) -> None:
    async with StoreRegistry() as stores:
        shared = await stores.get("memory://shared")
        assert await stores.get("memory://shared") is shared  # one memory store per name
        assert await stores.get("memory://other") is not shared
        # Two runs opening one store at once get one instance (opening SQLite yields).
        sqlite = normalize_uri(f"sqlite://{tmp_path}/state.db", field="f")
        first, second = await asyncio.gather(stores.get(sqlite), stores.get(sqlite))
        assert first is second
        file_uri = normalize_uri(f"file://{tmp_path}/s/state.json", field="f")
        assert await stores.get(file_uri) is await stores.atomic(file_uri)
        await (await stores.get(file_uri)).set("k", "v")
    assert (tmp_path / "s" / "state.json").exists()  # open_store made the directory


async def test_a_store_that_hangs_while_opening_stalls_no_other_store() -> None:
    # A server that accepts connections (the kernel's backlog) and never answers a byte.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        async with StoreRegistry() as stores:
            hung = asyncio.create_task(stores.get(f"redis://127.0.0.1:{port}/0"))
            await asyncio.sleep(0.2)
            assert not hung.done()
            # Under one lock shared by every store, this waited for the hung open (issue 12.1).
            await asyncio.wait_for(stores.get("memory://other"), 1)
            hung.cancel()
            # redis-py may turn the cancellation of its read into its own timeout error.
            with pytest.raises((asyncio.CancelledError, StoreError)):
                await hung


async def test_a_run_on_sqlite_stores_completes_and_its_state_is_there(tmp_path: Path) -> None:
    state = f"sqlite://{tmp_path}/state.db"
    checkpoints = f"sqlite://{tmp_path}/checkpoints/runs.db"
    config = ServerConfig(
        token=TOKEN, listen="127.0.0.1:0", store_uri=state, python_tools={"echo": ECHO},
        heartbeat_s=0.5, grace_s=0.1,
    )  # fmt: skip
    request = run_request("sq-1", tools=("echo",), arguments={"text": "hi"}, store_uri=checkpoints)
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        await client.start_run(request)
        events = [event async for event in client.watch("sq-1")]
        run = await client.get_run("sq-1", full=True)
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert run.status == pb.RUN_STATUS_COMPLETED
    assert [task.result for task in run.tasks] == ["done: echo:hi", "done: echo:hi"]
    async with open_store(checkpoints) as store:
        [summary] = await list_checkpoints(store)
    assert (summary.run_id, summary.status) == ("sq-1", "completed")
    async with open_store(state) as store:
        assert await store.get(sidecar_key(RUN_KIND, "sq-1")) is not None


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("file:///tmp/a\x00b.json", "contains a NUL byte"),
        ("file:///tmp/a%00b.json", "contains a NUL byte"),  # decoded later, refused now
        ("sqlite:///tmp/" + "d/" * 2100 + "s.db", "the path is longer than 4096 bytes"),
        ("file:///tmp/" + "n" * 256 + ".json", "a path component is longer than 255 bytes"),
    ],
)
def test_store_paths_the_system_cannot_name_are_refused_up_front(uri: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message) as caught:
        normalize_uri(uri, field="checkpoint.store_uri")
    assert caught.value.metadata["field"] == "checkpoint.store_uri"


async def test_a_store_in_a_run_journal_directory_is_refused(tmp_path: Path) -> None:
    # A state file there would read, or overwrite, a run's journal file of the same name.
    inside = tmp_path / "state.json.journals" / "r1.jsonl"
    with pytest.raises(InvalidArgument, match="is in a run journal directory") as caught:
        await check_request_store(
            f"file://{inside}",
            roots=[str(tmp_path)],
            default_uri=f"file://{tmp_path}/state.json",
            field="checkpoint.store_uri",
        )
    assert caught.value.metadata["field"] == "checkpoint.store_uri"

"""What a token holder may name as a run's store and key (issue 12, items 1, 4, 5 and 6).

A store URI and a checkpoint key in ``StartRun`` come from a client. File and SQLite stores are
confined to the operator's store roots (default: the directory of ``--store``); a state "file"
must be a regular file; a checkpoint key must be the run's own; and every spelling of one state
file is one store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import TYPE_CHECKING

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, run_request
from test_sidecar_auth import error_info

from oma_actors import open_store
from oma_actors.checkpoint import list_checkpoints
from oma_actors.keyspace import sidecar_key
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.runs import RUN_KIND
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


def config(store_uri: str, **kwargs: object) -> ServerConfig:
    return ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=store_uri,
        python_tools={"echo": ECHO},
        heartbeat_s=0.5,
        grace_s=0.1,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[SidecarClient]:
    """A sidecar whose state file is ``tmp_path/root/state.json`` (so its root is that dir)."""
    (tmp_path / "root").mkdir()
    async with (
        Sidecar(config(f"file://{tmp_path}/root/state.json")) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        yield client


def echo_run(run_id: str, store_uri: str = "", key: str = "") -> pb.StartRunRequest:
    request = run_request(run_id, tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.checkpoint.store_uri = store_uri
    request.checkpoint.key = key
    return request


async def refused(client: SidecarClient, request: pb.StartRunRequest) -> tuple[str, str]:
    """(reason, field) of a StartRun that must fail with INVALID_ARGUMENT, within 2 s."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(client.start_run(request), 2)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    info = error_info(caught.value)
    return info.reason, info.metadata["field"]


async def finished(client: SidecarClient, run_id: str) -> pb.Run:
    [event async for event in client.watch(run_id)]
    return await client.get_run(run_id, full=True)


async def test_file_stores_outside_the_store_root_are_refused_and_never_created(
    served: SidecarClient, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root" / "escape").symlink_to(tmp_path / "elsewhere")
    for uri in (
        f"file://{tmp_path}/elsewhere/state.json",
        f"file://{tmp_path}/root/escape/state.json",  # a symlink out of the root
        f"file://{tmp_path}/root/../elsewhere/deep/tree/state.json",
        f"file://{tmp_path}/rootless/state.json",  # shares the root's name as a prefix
        f"sqlite://{tmp_path}/elsewhere/state.db",
        "file:///etc/oma-intruder.json",
    ):
        reason_field = await refused(served, echo_run("r-out", uri))
        assert reason_field == ("STORE_OUTSIDE_ROOT", "checkpoint.store_uri"), uri
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert not await asyncio.to_thread(os.path.exists, "/etc/oma-intruder.json")


async def test_file_stores_inside_the_store_root_work(
    served: SidecarClient, tmp_path: Path
) -> None:
    uri = f"file://{tmp_path}/root/runs/cp.json"
    await served.start_run(echo_run("r-in", uri))
    assert (await finished(served, "r-in")).status == pb.RUN_STATUS_COMPLETED
    assert (tmp_path / "root" / "runs" / "cp.json").exists()


async def test_a_fifo_or_directory_in_the_root_is_refused_at_once(
    served: SidecarClient, tmp_path: Path
) -> None:
    # A FIFO used to block StartRun (and a worker thread) forever, /dev/zero to eat all memory.
    fifo = tmp_path / "root" / "fifo.json"
    os.mkfifo(fifo)
    (tmp_path / "root" / "dir.json").mkdir()
    try:
        for name in ("fifo.json", "dir.json"):
            uri = f"file://{tmp_path}/root/{name}"
            reason_field = await refused(served, echo_run("r-odd", uri))
            assert reason_field == ("VALIDATION", "checkpoint.store_uri"), name
    finally:
        # Without the check a worker thread waits in open() for a writer: release it, so a
        # failing run of this test still ends.
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def test_explicit_store_roots_replace_the_default(tmp_path: Path) -> None:
    (tmp_path / "allowed").mkdir()
    state = f"file://{tmp_path}/state.json"
    roots = (str(tmp_path / "allowed"),)
    async with (
        Sidecar(config(state, store_roots=roots)) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        await client.start_run(echo_run("r-a", f"file://{tmp_path}/allowed/cp.json"))
        reason, _ = await refused(client, echo_run("r-b", f"file://{tmp_path}/other.json"))
        assert reason == "STORE_OUTSIDE_ROOT"
        # The operator's own store is always allowed, also when named explicitly.
        await client.start_run(echo_run("r-c", state))
        assert (await finished(client, "r-a")).status == pb.RUN_STATUS_COMPLETED
        assert (await finished(client, "r-c")).status == pb.RUN_STATUS_COMPLETED


async def test_a_sidecar_on_a_memory_store_takes_no_file_store_from_a_client() -> None:
    async with (
        Sidecar(config("memory://")) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        reason, _ = await refused(client, echo_run("r-m", "file:///tmp/oma-any.json"))
        assert reason == "STORE_OUTSIDE_ROOT"
        await client.start_run(echo_run("r-n", "memory://other"))  # not a file: fine


async def test_a_checkpoint_key_must_be_the_runs_own(served: SidecarClient, tmp_path: Path) -> None:
    await served.start_run(echo_run("victim"))
    await finished(served, "victim")
    for key in (
        sidecar_key(RUN_KIND, "victim"),  # the registry's record of another run
        "__oma_checkpoint__/victim/latest",  # another run's checkpoint
        "__oma_approval__/apr_x",
        "plain-key",
        "__oma_checkpoint__/attacker/",  # the prefix alone
    ):
        assert await refused(served, echo_run("attacker", key=key)) == (
            "VALIDATION",
            "checkpoint.key",
        ), key
    without_id = echo_run("", key="__oma_checkpoint__/x/latest")
    assert await refused(served, without_id) == ("VALIDATION", "checkpoint.key")
    own = "__oma_checkpoint__/mine/custom"
    await served.start_run(echo_run("mine", key=own))
    assert (await finished(served, "mine")).checkpoint.key == own
    assert (await served.get_run("victim")).status == pb.RUN_STATUS_COMPLETED
    async with open_store(f"file://{tmp_path}/root/state.json") as store:
        assert await store.get(sidecar_key(RUN_KIND, "victim")) is not None


async def test_two_spellings_of_one_state_file_are_one_store(tmp_path: Path) -> None:
    # Two FileStores on one file lost checkpoints in 4 of 4 runs, and one deleted the other's
    # temp file: every spelling must reach the one store of the sidecar (DESIGN D13).
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    state = f"file://{tmp_path}/real/state.json"
    spellings = (
        f"file:////{tmp_path}/real/state.json",
        f"file://{tmp_path}/link/state.json",
        f"file://localhost{tmp_path}/real/../real/state.json",
    )
    async with (
        Sidecar(config(state)) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        for index, uri in enumerate(spellings):
            await client.start_run(echo_run(f"sp-{index}", uri))
        await client.start_run(echo_run("sp-default"))
        runs = [await finished(client, f"sp-{index}") for index in range(len(spellings))]
        runs.append(await finished(client, "sp-default"))
    assert {run.status for run in runs} == {pb.RUN_STATUS_COMPLETED}
    assert {run.checkpoint.store_uri for run in runs} == {state}
    async with open_store(state) as store:
        summaries = await list_checkpoints(store)
    assert sorted(summary.run_id for summary in summaries) == ["sp-0", "sp-1", "sp-2", "sp-default"]
    assert sorted(path.name for path in (tmp_path / "real").iterdir()) == [
        "state.json",
        "state.json.journals",  # every spelling's runs keep their journals in one directory
        "state.json.lock",
    ]


async def test_database_stores_must_match_an_allow_store_pattern(served: SidecarClient) -> None:
    # Issue 24, item 3: a client's store_uri could name any PostgreSQL or Redis server. Nothing
    # listens on these ports: a refusal must come before any connection attempt.
    for uri in (
        "postgresql://oma:hunter2@127.0.0.1:1/other?table=t",
        "redis://:hunter2@127.0.0.1:1/0",
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await asyncio.wait_for(served.start_run(echo_run("db-1", uri)), 2)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, uri
        info = error_info(caught.value)
        assert info.reason == "STORE_NOT_ALLOWED"
        assert info.metadata["field"] == "checkpoint.store_uri"
        assert "127.0.0.1:1" in (caught.value.details() or "")
        assert "hunter2" not in (caught.value.details() or "")
        assert "hunter2" not in str(dict(info.metadata))
    assert await served.list_runs() == []


async def test_an_allowed_database_store_passes_the_policy(tmp_path: Path) -> None:
    # Allowed, so the sidecar does try to connect: nothing listens there, the store is
    # unavailable (not refused by the policy).
    allowed = ("redis://127.0.0.1:1/*",)
    async with (
        Sidecar(config("memory://", allowed_stores=allowed)) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(echo_run("db-2", "redis://127.0.0.1:1/0"))
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(echo_run("db-3", "redis://127.0.0.2:1/0"))
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED

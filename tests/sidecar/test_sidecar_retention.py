"""DeleteRun and the retention policy: a long-lived sidecar's store and memory stay bounded."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, eventually, run_request
from test_sidecar_runs import events_of

from oma_actors.keyspace import checkpoint_key, sidecar_key
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient, error_reason
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from oma_actors.stores import AtomicStore


def echo_run(run_id: str) -> pb.StartRunRequest:
    return run_request(run_id, tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))


@pytest.fixture
async def retaining() -> AsyncIterator[tuple[Sidecar, SidecarClient]]:
    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri="memory://",
        python_tools={"echo": ECHO},
        heartbeat_s=0.5,
        grace_s=0.1,
        retain_runs=3,
        retention_interval_s=0.05,
    )
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        yield server, client


async def keys_of(store: AtomicStore | None) -> list[str]:
    assert store is not None
    return sorted(entry.key for entry in await store.list())


async def run_to_end(client: SidecarClient, run_id: str) -> None:
    await client.start_run(echo_run(run_id))
    events = await asyncio.wait_for(events_of(client, run_id), 10)
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED


async def test_delete_run_removes_every_key_of_the_run(
    sidecar: Sidecar, client: SidecarClient
) -> None:
    await run_to_end(client, "gone")
    await run_to_end(client, "kept")
    before = await keys_of(sidecar.state)
    assert checkpoint_key("gone") in before
    assert sidecar_key("run", "gone") in before
    deleted = await client.delete_run("gone")
    after = await keys_of(sidecar.state)
    assert [key for key in after if "gone" in key] == []
    assert deleted == len(before) - len(after) >= 3
    assert "kept" in {key.rsplit("/", 2)[-2] for key in after if key.endswith("/latest")}
    assert sidecar.registry is not None
    assert "gone" not in sidecar.registry.cached()
    for call in (client.get_run("gone"), client.delete_run("gone")):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_delete_run_refuses_an_active_run(client: SidecarClient) -> None:
    request = run_request("busy", task_ids=("t1",))
    request.team.host_tools.add(name="lookup", input_schema_json='{"type": "object"}')
    await client.start_run(request)  # no host: the call waits, the run stays running
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.delete_run("busy")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "RUN_ACTIVE"
    await client.cancel_run("busy")
    await asyncio.wait_for(events_of(client, "busy"), 5)
    assert await client.delete_run("busy") > 0


async def test_retention_keeps_store_and_memory_flat_over_waves_of_runs(
    retaining: tuple[Sidecar, SidecarClient],
) -> None:
    sidecar, client = retaining
    registry = sidecar.registry
    assert registry is not None
    sizes: list[tuple[int, int]] = []
    for wave in range(3):
        for index in range(8):
            await run_to_end(client, f"w{wave}-{index}")
        newest = f"w{wave}-7"
        await eventually(lambda: len(registry.cached()) <= 3, within=5)
        keys = await keys_of(sidecar.state)
        assert any(newest in key for key in keys)  # the newest are the ones kept
        sizes.append((len(keys), len(registry.cached())))
    assert sizes[0] == sizes[1] == sizes[2], sizes
    assert sizes[0][1] == 3
    listed = await client.list_runs()
    assert sorted(run.run_id for run in listed) == ["w2-5", "w2-6", "w2-7"]


async def test_delete_run_refuses_a_run_another_sidecar_executes(tmp_path: Path) -> None:
    # Sidecar b does not execute the run itself: only the stored status tells it a sibling does.
    uri = f"sqlite://{tmp_path / 'shared.db'}"

    def config(owner: str) -> ServerConfig:
        return ServerConfig(
            token=TOKEN, listen="127.0.0.1:0", store_uri=uri, owner_id=owner, grace_s=0.1
        )

    async with (
        Sidecar(config("a")) as a,
        SidecarClient(a.address, TOKEN) as client_a,
        Sidecar(config("b")) as b,
        SidecarClient(b.address, TOKEN) as client_b,
    ):
        request = run_request("busy", task_ids=("t1",))
        request.team.host_tools.add(name="lookup", input_schema_json='{"type": "object"}')
        await client_a.start_run(request)  # no host: the call waits, the run stays running
        await eventually(lambda: a.registry is not None and "busy" in a.registry.cached())
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client_b.delete_run("busy")
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(caught.value) == "RUN_ACTIVE"
        assert (await client_b.get_run("busy")).status in (
            pb.RUN_STATUS_QUEUED,
            pb.RUN_STATUS_RUNNING,
        )
        await client_a.cancel_run("busy")


async def test_retention_keeps_suspended_runs(tmp_path: Path) -> None:
    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri="memory://",
        python_tools={"echo": ECHO},
        grace_s=0.1,
        retain_runs=0,
        retention_interval_s=0.05,
    )
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        held = echo_run("held")
        held.approval_gates.tool_calls.append("echo")
        await client.start_run(held)
        events = await asyncio.wait_for(events_of(client, "held"), 10)
        assert events[-1].run_status.status == pb.RUN_STATUS_SUSPENDED
        await run_to_end(client, "done")
        registry = server.registry
        assert registry is not None
        # "done" finished after "held" suspended: the sweep that deletes it has seen both.
        await eventually(lambda: "done" not in registry.cached(), within=5)
        assert (await client.get_run("held")).status == pb.RUN_STATUS_SUSPENDED
        assert len(await client.list_approvals("held")) == 1


def test_oma_serve_retains_1000_finished_runs_by_default() -> None:
    import argparse

    from sidecar.cli import add_arguments
    from sidecar.defaults import DEFAULT_RETAIN_RUNS

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    assert (args.retain_runs, args.no_retention) == (DEFAULT_RETAIN_RUNS, False) == (1000, False)
    assert parser.parse_args(["--no-retention"]).no_retention
    shown = " ".join(parser.format_help().split())
    assert "default 1000, so a long-lived sidecar's store stays bounded" in shown

"""A watch of a run that is deleted ends with NOT_FOUND instead of heartbeating forever.

A suspended run watched with ``follow_suspended`` (or a run followed from another sidecar)
ends only when its status does; ``DeleteRun`` removed the run and its stream kept sending
heartbeats: a deleted run never tells an end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN
from test_sidecar_approvals import suspended_run
from test_sidecar_auth import error_info

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.server import ServerConfig, Sidecar


@pytest.mark.parametrize("stream", ["journal", "progress"])
async def test_a_watch_of_a_deleted_run_ends_with_not_found(tmp_path: Path, stream: str) -> None:
    config = ServerConfig(
        token=TOKEN, listen="127.0.0.1:0", store_uri=f"file://{tmp_path / 'state.json'}",
        python_tools={"echo": ECHO}, heartbeat_s=0.2, grace_s=0.1,
    )  # fmt: skip
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        await asyncio.wait_for(suspended_run(client, "del-w"), 10)
        request = pb.WatchRunRequest(
            run_id="del-w", follow_suspended=True, allow_gap=True,
            journal=stream == "journal", progress=stream == "progress",
        )  # fmt: skip
        call = client.runs.WatchRun(request, metadata=client.metadata)
        await call.read()  # the stream is open
        await client.delete_run("del-w")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await asyncio.wait_for(drain(call), 10)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert error_info(caught.value).reason == "RUN_NOT_FOUND"


async def drain(call: grpc.aio.UnaryStreamCall[pb.WatchRunRequest, pb.RunEvent]) -> None:
    """Read the stream until it ends (heartbeats included)."""
    while await call.read() is not grpc.aio.EOF:
        pass

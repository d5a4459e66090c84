"""The role table as a matrix, and tokens that only resemble a principal's.

``test_sidecar_principals`` checks a principal without roles and a few pairs; here one principal
per role calls every RPC, against a matrix written out from the API's documented roles (not read
back from ``sidecar.access``): widening any entry of the table (a reviewer restoring or deleting
runs, a host listing approvals) fails here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc
import pytest
from test_sidecar_principals import (
    ALL_METHODS,
    _raw_call,
    principals_config,
    status_with,
)

from sidecar.client import SidecarClient
from sidecar.server import Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

ROLE_TOKENS = {role: f"only-{role}-" + "z" * 24 for role in ("runs", "reviewer", "host", "admin")}
RUN_METHODS = {
    f"/oma.v1.RunService/{name}"
    for name in ("StartRun", "GetRun", "ListRuns", "WatchRun", "RestoreRun", "CancelRun",
                 "DeleteRun", "GetRunTimeline", "GetRunHistory", "ForkRun")
}  # fmt: skip
MAY: dict[str, set[str]] = {
    "runs": RUN_METHODS
    | {"/oma.v1.ApprovalService/ListApprovals", "/oma.v1.ApprovalService/GetApproval"},
    "reviewer": {
        "/oma.v1.ApprovalService/ListApprovals",
        "/oma.v1.ApprovalService/GetApproval",
        "/oma.v1.ApprovalService/DecideApproval",
    },
    "host": {"/oma.v1.ToolHostService/Connect", "/oma.v1.ToolHostService/CompleteToolCall"},
    "admin": set(),
}
EVERYONE = {"/oma.v1.SystemService/GetServerInfo"}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Sidecar]:
    """A sidecar with one principal per role, each holding that role alone."""
    entries = [
        {"token": token, "principal": f"only-{role}", "tenant": "acme", "roles": [role]}
        for role, token in ROLE_TOKENS.items()
    ]
    config = principals_config(tmp_path, entries)
    async with Sidecar(config) as sidecar:
        yield sidecar


def test_the_matrix_names_every_rpc() -> None:
    assert set().union(*MAY.values()) | EVERYONE == set(ALL_METHODS)


@pytest.mark.parametrize("role", sorted(ROLE_TOKENS))
async def test_each_role_calls_exactly_its_rpcs(server: Sidecar, role: str) -> None:
    denied = {
        method
        for method in ALL_METHODS
        if await status_with(server, ROLE_TOKENS[role], method) == grpc.StatusCode.PERMISSION_DENIED
    }
    assert denied == set(ALL_METHODS) - MAY[role] - EVERYONE


@pytest.mark.parametrize(
    "token", [ROLE_TOKENS["runs"][:-1], ROLE_TOKENS["runs"][:1], ROLE_TOKENS["runs"] + "z"]
)
async def test_a_token_that_only_resembles_a_principals_is_unauthenticated(
    server: Sidecar, token: str
) -> None:
    async with SidecarClient(server.address, token) as stranger:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stranger.server_info()
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_an_empty_bearer_token_is_unauthenticated(server: Sidecar) -> None:
    metadata = (("authorization", "Bearer "),)
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = _raw_call(channel, "/oma.v1.SystemService/GetServerInfo")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(b"", metadata=metadata, timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED

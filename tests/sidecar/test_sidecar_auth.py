"""Bearer-token auth: every RPC but health needs it; where the token comes from."""

from __future__ import annotations

import asyncio
import os
import stat
from typing import TYPE_CHECKING

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from sidecar_helpers import TOKEN

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar._pb.oma.v1 import sidecar_pb2_grpc as pb_grpc
from sidecar.auth import check_bearer, resolve_token
from sidecar.client import error_info as client_error_info
from sidecar.client import error_reason
from sidecar.defaults import TOKEN_ENV

if TYPE_CHECKING:
    from pathlib import Path

    from sidecar.server import Sidecar


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The ErrorInfo detail of a failed call (its code and message checked by grpcio-status)."""
    info = client_error_info(error)
    assert info is not None, "no grpc-status-details-bin trailer"
    return info


@pytest.mark.parametrize(
    "metadata",
    [
        (),
        (("authorization", "Bearer wrong"),),
        (("authorization", TOKEN),),  # no "Bearer " scheme
        (("authorization", f"Bearer {TOKEN}x"),),
    ],
    ids=["missing", "wrong", "no-scheme", "longer"],
)
async def test_rpcs_without_the_token_are_unauthenticated(
    sidecar: Sidecar, metadata: tuple[tuple[str, str], ...]
) -> None:
    async with grpc.aio.insecure_channel(sidecar.address) as channel:
        system = pb_grpc.SystemServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await system.GetServerInfo(pb.GetServerInfoRequest(), metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error_reason(caught.value) == "UNAUTHENTICATED"
        info = error_info(caught.value)
        assert (info.reason, info.domain) == ("UNAUTHENTICATED", "oma.v1")
        runs = pb_grpc.RunServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await runs.StartRun(pb.StartRunRequest(), metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_health_needs_no_token_and_reflection_does(sidecar: Sidecar) -> None:
    async with grpc.aio.insecure_channel(sidecar.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "oma.v1.RunService", "oma.v1.ToolHostService"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stub.ServerReflectionInfo(iter([request])):
                pass
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        metadata = (("authorization", f"Bearer {TOKEN}"),)
        replies = [r async for r in stub.ServerReflectionInfo(iter([request]), metadata=metadata)]
        names = {service.name for service in replies[0].list_services_response.service}
        assert {"oma.v1.RunService", "oma.v1.ApprovalService", "grpc.health.v1.Health"} <= names


def test_check_bearer_compares_the_whole_token() -> None:
    assert check_bearer((("authorization", "Bearer abc"),), "abc")
    assert check_bearer((("Authorization", b"Bearer abc"),), "abc")
    assert not check_bearer((("authorization", "Bearer abcd"),), "abc")
    assert not check_bearer((("authorization", "Bearer ABC"),), "abc")  # the token is exact
    assert not check_bearer((("authorization", "Basic abc"),), "abc")
    assert not check_bearer((("authorization", "abc"),), "abc")
    assert not check_bearer(None, "abc")


def test_the_bearer_scheme_is_case_insensitive() -> None:
    # RFC 9110: the auth scheme is case-insensitive; "bearer" used to be refused.
    for scheme in ("bearer", "BEARER", "bEaReR"):
        assert check_bearer((("authorization", f"{scheme} abc"),), "abc"), scheme


async def test_a_lower_case_bearer_is_served(sidecar: Sidecar) -> None:
    async with grpc.aio.insecure_channel(sidecar.address) as channel:
        system = pb_grpc.SystemServiceStub(channel)  # type: ignore[no-untyped-call]
        info = await system.GetServerInfo(
            pb.GetServerInfoRequest(), metadata=(("authorization", f"bearer {TOKEN}"),)
        )
    assert "oma.v1" in info.api_versions


def test_token_from_env_then_file_then_generated_0600(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    generated = tmp_path / "state" / "sidecar.token"
    env_token = resolve_token(
        token_file=token_file, env={TOKEN_ENV: "from-env"}, generated_path=generated
    )
    assert (env_token.value, env_token.source) == ("from-env", "env")
    file_token = resolve_token(token_file=token_file, env={}, generated_path=generated)
    assert (file_token.value, file_token.source) == ("from-file", "file")
    made = resolve_token(token_file=None, env={}, generated_path=generated)
    assert made.source == "generated"
    assert made.path == generated
    assert len(made.value) >= 32
    assert generated.read_text().strip() == made.value
    assert stat.S_IMODE(os.stat(generated).st_mode) == 0o600
    again = resolve_token(token_file=None, env={}, generated_path=generated)
    assert again.value == made.value  # kept: hosts that read it once can reconnect
    with pytest.raises(ValueError, match="empty"):
        resolve_token(token_file=None, env={TOKEN_ENV: " "}, generated_path=generated)
    token_file.write_text("")
    with pytest.raises(ValueError, match="empty"):
        resolve_token(token_file=token_file, env={}, generated_path=generated)


def test_an_existing_generated_token_is_kept_and_made_private(tmp_path: Path) -> None:
    generated = tmp_path / "sidecar.token"
    generated.write_text("kept-token\n")
    os.chmod(generated, 0o644)
    token = resolve_token(token_file=None, env={}, generated_path=generated)
    assert (token.value, token.source, token.path) == ("kept-token", "generated", generated)
    assert stat.S_IMODE(os.stat(generated).st_mode) == 0o600
    generated.write_text("")  # an empty file holds no token: a new one replaces it
    fresh = resolve_token(token_file=None, env={}, generated_path=generated)
    assert len(fresh.value) >= 32
    assert generated.read_text().strip() == fresh.value
    assert [p.name for p in tmp_path.iterdir()] == ["sidecar.token"]  # no temp file left


async def test_an_unauthenticated_tool_stream_is_always_unauthenticated(sidecar: Sidecar) -> None:
    # A host that streams its messages at once and half-closes used to get INTERNAL now and
    # then (about 1 in 10 here): the refusal raced the messages still arriving.
    register = pb.ToolHostMessage(register=pb.Register(host_id="h"))
    codes: list[grpc.StatusCode] = []
    async with grpc.aio.insecure_channel(sidecar.address) as channel:
        tools = pb_grpc.ToolHostServiceStub(channel)  # type: ignore[no-untyped-call]

        async def attempt() -> None:
            call = tools.Connect(iter([register] * 50), metadata=(("authorization", "Bearer x"),))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                async for _ in call:
                    pass
            codes.append(caught.value.code())

        await asyncio.gather(*(attempt() for _ in range(80)))
    assert set(codes) == {grpc.StatusCode.UNAUTHENTICATED}

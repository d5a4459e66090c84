"""Tenancy guards no other test held (helper's mutation sweep): forks, request ids, host tools.

A fork belongs to its parent's tenant; a retried start under principals finds its run by the
tenant's request claim; a host tool registered by another tenant's host is unknown to a run,
named by no waiting notice, and a result for another tenant's answered call is an unknown call.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, cast

import grpc
import pytest
from sidecar_helpers import LOOKUP_SCHEMA, answer, lookup_tool, run_request
from test_sidecar_history import fork, history
from test_sidecar_principals import (
    TOKENS,
    host_tool_request,
    hosting,
    not_found,
    principals_config,
)

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTool, HostTools, SidecarClient, error_reason
from sidecar.server import Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator
    from pathlib import Path


@pytest.fixture
async def clients(tmp_path: Path) -> AsyncIterator[dict[str, SidecarClient]]:
    """A client per principal of ``ENTRIES``, on a sidecar with a file store (forks need one)."""
    config = principals_config(tmp_path, store_uri=f"file://{tmp_path / 'state.json'}")
    async with Sidecar(config) as server, contextlib.AsyncExitStack() as stack:
        yield {
            name: await stack.enter_async_context(SidecarClient(server.address, token))
            for name, token in TOKENS.items()
        }


async def finished(client: SidecarClient, run_id: str) -> pb.RunEvent:
    events = [event async for event in client.watch(run_id)]
    return events[-1]


async def test_a_fork_belongs_to_its_parents_tenant(clients: dict[str, SidecarClient]) -> None:
    alice, bob = clients["alice"], clients["bob"]
    await alice.start_run(run_request("parent", tools=("echo",), arguments={"text": "x"}))
    assert (await finished(alice, "parent")).run_status.status == pb.RUN_STATUS_COMPLETED
    at = (await history(alice, "parent"))[1].seq
    await fork(alice, "parent", at, "child")
    assert (await alice.get_run("child")).run_id == "child"
    assert "child" in {run.run_id for run in await alice.list_runs()}
    await not_found(bob.get_run("child"))


async def test_a_retried_start_finds_its_run_by_its_request_id(
    clients: dict[str, SidecarClient],
) -> None:
    alice = clients["alice"]
    request = run_request("", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.request_id = "alice-request"
    first = await alice.start_run(request)
    retry = await asyncio.wait_for(alice.start_run(request), 10)
    assert first.created
    assert (retry.created, retry.run.run_id) == (False, first.run.run_id)


async def test_a_host_tool_of_another_tenant_is_unknown_to_a_run(
    clients: dict[str, SidecarClient],
) -> None:
    acme_host = HostTools(clients["acme-host"], "acme-host", [lookup_tool(answer)])
    async with hosting(acme_host):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await clients["bob"].start_run(run_request("bob-run", task_ids=("t1",)))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(caught.value) == "UNKNOWN_TOOL"
        started = await clients["alice"].start_run(run_request("alice-run", task_ids=("t1",)))
        assert started.created  # acme's own run may use acme's host tool
        assert (await finished(clients["alice"], "alice-run")).run_status.status == (
            pb.RUN_STATUS_COMPLETED
        )


async def test_a_waiting_call_names_no_host_of_another_tenant(
    clients: dict[str, SidecarClient],
) -> None:
    bob = clients["bob"]
    acme_host = HostTools(clients["acme-host"], "acme-host", [lookup_tool(answer)])
    async with hosting(acme_host):
        await bob.start_run(host_tool_request("bob-tools"))
        waiting = None
        watched = cast("AsyncGenerator[pb.RunEvent, None]", bob.watch("bob-tools"))
        async with contextlib.aclosing(watched) as events:
            async for event in events:
                if event.type == "tool_call_waiting":
                    waiting = event
                    break
        assert waiting is not None
        assert waiting.data["reason"] == "no connected host offers the tool 'lookup'"
        await bob.cancel_run("bob-tools")
    assert acme_host.ledger.deliveries == []


async def complete(client: SidecarClient, result: pb.ToolResult) -> int:
    request = pb.CompleteToolCallRequest(result=result)
    reply = await client.tools.CompleteToolCall(request, metadata=client.metadata)
    return int(reply.ack.status)


async def test_another_tenants_answered_call_is_unknown(clients: dict[str, SidecarClient]) -> None:
    calls: list[pb.ToolCall] = []

    async def recording(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        calls.append(call)
        return "acme's answer"

    tool = HostTool(name="lookup", description="x", input_schema=LOOKUP_SCHEMA, handler=recording)
    async with hosting(HostTools(clients["acme-host"], "acme-host", [tool])):
        await clients["alice"].start_run(host_tool_request("acme-tools"))
        assert (await finished(clients["alice"], "acme-tools")).run_status.status == (
            pb.RUN_STATUS_COMPLETED
        )
    [call] = calls
    again = pb.ToolResult(call_id=call.call_id, tool_call_id=call.tool_call_id)
    again.success.output_text = "again"
    assert await complete(clients["bob"], again) == pb.ResultAck.STATUS_UNKNOWN_CALL
    assert await complete(clients["acme-host"], again) == pb.ResultAck.STATUS_DUPLICATE


async def test_a_result_naming_another_tool_call_id_is_unknown(
    clients: dict[str, SidecarClient],
) -> None:
    delivered: asyncio.Queue[pb.ToolCall] = asyncio.Queue()
    release = asyncio.Event()

    async def held(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        delivered.put_nowait(call)
        await release.wait()
        return "the real answer"

    tool = HostTool(name="lookup", description="x", input_schema=LOOKUP_SCHEMA, handler=held)
    async with hosting(HostTools(clients["acme-host"], "acme-host", [tool])):
        await clients["alice"].start_run(host_tool_request("acme-tools"))
        call = await asyncio.wait_for(delivered.get(), 10)
        wrong = pb.ToolResult(call_id=call.call_id, tool_call_id=call.tool_call_id + "-other")
        wrong.success.output_text = "a wrong answer"
        assert await complete(clients["acme-host"], wrong) == pb.ResultAck.STATUS_UNKNOWN_CALL
        release.set()
        assert (await finished(clients["alice"], "acme-tools")).run_status.status == (
            pb.RUN_STATUS_COMPLETED
        )
    done = await clients["alice"].get_run("acme-tools", full=True)
    assert "the real answer" in done.tasks[0].result

"""A host tool's result over the input quota ends its call once, with an error the model sees.

The result's Connect message is refused (RESOURCE_EXHAUSTED, ``INPUT_TOO_LARGE``) and the refusal
ends the stream. The call used to stay outstanding, so every reconnect delivered it again: the
host ran it about twice a second until the host-call timeout, and the model was told only that
no result came. The host did run the call and did answer it, so the call is not delivered again:
it ends with an error result naming the size and the limit, and the run goes on.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import grpc
from sidecar_helpers import TOKEN, lookup_tool, run_request
from test_sidecar_auth import error_info
from test_sidecar_principals import ENTRIES, TOKENS, write_principals
from test_sidecar_quotas import config_for

from oma_actors import ToolContext
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient, error_reason
from sidecar.principals import Principals
from sidecar.server import MIN_INPUT_BYTES, Sidecar
from sidecar.tool_host import ToolHost

if TYPE_CHECKING:
    from pathlib import Path

LIMIT = MIN_INPUT_BYTES
LOOKUP = pb.ToolDefinition(name="lookup", input_schema_json='{"type": "object"}')
Ack = pb.ResultAck.Status
ENDED = (pb.RUN_STATUS_COMPLETED, pb.RUN_STATUS_FAILED, pb.RUN_STATUS_CANCELLED)


class RecordingHost(HostTools):
    """A host that keeps the errors its sessions ended with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.errors: list[grpc.aio.AioRpcError] = []

    async def _session(self) -> None:
        try:
            await super()._session()
        except grpc.aio.AioRpcError as exc:
            self.errors.append(exc)
            raise


async def ended(client: SidecarClient, run_id: str) -> pb.Run:
    while True:
        run = await client.get_run(run_id, full=True)
        if run.status in ENDED:
            return run
        await asyncio.sleep(0.05)


async def test_a_result_over_the_input_quota_ends_the_call_once_with_an_error() -> None:
    # A timeout short enough that the bug (redelivery until the timeout) fails fast.
    config = config_for("memory://", max_input_bytes=LIMIT, host_call_timeout_s=6.0)

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        return "B" * (2 * LIMIT) if call.task_id == "t1" else f"small for {call.task_id}"

    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        host = RecordingHost(client, "big-host", [lookup_tool(lookup)])
        async with asyncio.TaskGroup() as group:
            hosting = group.create_task(host.run(reconnect_delay=0.05))
            try:
                await asyncio.wait_for(host.registered.wait(), 5)
                await client.start_run(run_request("big-result", task_ids=("t1", "t2")))
                run = await asyncio.wait_for(ended(client, "big-result"), 15)
                await asyncio.sleep(0.5)  # time for a redelivery, were there one
            finally:
                host.stop()
                hosting.cancel()

    assert run.status == pb.RUN_STATUS_COMPLETED, run
    first, second = run.tasks
    assert first.result.startswith("done: Error: tool 'lookup' returned a result of "), first
    assert f"over the sidecar's limit of {LIMIT} bytes (--max-input-bytes)" in first.result
    assert "no result" not in first.result
    assert second.result == "done: small for t2"  # the run went on, the host served again
    # Each call was delivered once: the refused one was not delivered again.
    delivered = [(c.task_id, c.delivery_attempt, c.redelivery) for c in host.ledger.deliveries]
    assert delivered == [("t1", 1, False), ("t2", 1, False)]
    # The host was told why its result was refused.
    assert len(host.errors) == 1, host.errors
    assert host.errors[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_reason(host.errors[0]) == "INPUT_TOO_LARGE"
    assert error_info(host.errors[0]).metadata["field"] == "result.success.output_text"


async def test_only_an_outstanding_call_of_the_tenant_is_ended_by_a_refusal() -> None:
    host = ToolHost()
    session, _ = host.open_session(pb.Register(host_id="h", tools=[LOOKUP]), tenant="acme")
    ctx = ToolContext(run_id="r1", task_id="t1", tool_call_id="toolu_1", agent_name="a")
    calling = asyncio.create_task(
        host.call(ctx, "lookup", "{}", run_attempt=1, limit_s=5, tenant="acme")
    )
    call = (await asyncio.wait_for(session.outbox.get(), 5)).call
    big = pb.ToolResult(call_id=call.call_id, success=pb.ToolSuccess(output_text="x"))
    assert not host.refuse_oversized(big, size=9, limit=8, tenant="globex")  # another tenant's
    assert not host.refuse_oversized(pb.ToolResult(call_id="nope"), size=9, limit=8, tenant="acme")
    assert host.refuse_oversized(big, size=9, limit=8, tenant="acme")
    result = await asyncio.wait_for(calling, 5)
    assert result.is_error
    assert "'lookup' returned a result of 9 bytes, over the sidecar's limit of 8 bytes" in str(
        result.data
    )
    assert not session.in_flight  # the session's end will not deliver it again
    assert not host.refuse_oversized(big, size=9, limit=8, tenant="acme")  # ended once
    # A result sent later for the same delivery (CompleteToolCall) is a duplicate.
    assert host.submit(big, session=None, tenant="acme") == Ack.STATUS_DUPLICATE


async def test_under_principals_the_refused_result_ends_the_tenants_call(tmp_path: Path) -> None:
    # The refusal ends the call of the host's own tenant: one of another tenant (or of none)
    # would not be found, and the call would be delivered again until the host-call timeout.
    principals = Principals.from_file(write_principals(tmp_path / "p.json", ENTRIES))
    config = config_for(
        "memory://", max_input_bytes=LIMIT, host_call_timeout_s=6.0, token="", principals=principals
    )

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        return "B" * (2 * LIMIT)

    async with (
        Sidecar(config) as server,
        SidecarClient(server.address, TOKENS["alice"]) as runs,
        SidecarClient(server.address, TOKENS["acme-host"]) as hosting_client,
    ):
        host = RecordingHost(hosting_client, "acme-big-host", [lookup_tool(lookup)])
        async with asyncio.TaskGroup() as group:
            hosting = group.create_task(host.run(reconnect_delay=0.05))
            try:
                await asyncio.wait_for(host.registered.wait(), 5)
                await runs.start_run(run_request("acme-big", task_ids=("t1",)))
                run = await asyncio.wait_for(ended(runs, "acme-big"), 15)
            finally:
                host.stop()
                hosting.cancel()
    assert run.status == pb.RUN_STATUS_COMPLETED, run
    [task] = run.tasks
    assert f"over the sidecar's limit of {LIMIT} bytes (--max-input-bytes)" in task.result
    assert "no result" not in task.result

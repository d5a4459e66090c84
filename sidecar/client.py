"""A Python client for the sidecar, and an example flow (``python -m sidecar.client``).

``SidecarClient`` wraps the four services with the bearer token attached; ``HostTools`` serves
tools over ``ToolHostService.Connect`` (reconnecting, at-least-once, with a ledger of what was
delivered and acknowledged). The example starts a run on the scripted model whose agent calls a
tool implemented right here, watches its events and prints the result::

    oma serve --listen 127.0.0.1:50051 &
    python -m sidecar.client --address 127.0.0.1:50051 --token-file ~/.oma/sidecar.token
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar._pb.oma.v1 import sidecar_pb2_grpc as pb_grpc
from sidecar.status import REASON_TRAILER

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
    from types import TracebackType


def error_reason(error: grpc.aio.AioRpcError) -> str | None:
    """The ``oma-error-reason`` trailer of a failed call."""
    for key, value in error.trailing_metadata() or ():
        if key == REASON_TRAILER:
            return str(value)
    return None


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """The ``google.rpc.ErrorInfo`` a failed call carries in ``grpc-status-details-bin``.

    Read with grpcio-status, which also checks that the rich status agrees with the call's
    code and message (a ``ValueError`` if not).
    """
    status = rpc_status.from_call(error)
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    return None


class SidecarClient:
    """An async client (``async with SidecarClient(address, token) as client``).

    Args:
        address: ``host:port`` of the sidecar.
        token: the bearer token.
        root_certificates: PEM CA bundle for a TLS sidecar; ``None`` for plaintext loopback.
    """

    def __init__(self, address: str, token: str, *, root_certificates: bytes | None = None) -> None:
        self.address = address
        self.metadata = (("authorization", f"Bearer {token}"),)
        if root_certificates is None:
            self.channel: Any = grpc.aio.insecure_channel(address)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates)
            self.channel = grpc.aio.secure_channel(address, credentials)
        self.runs: Any = pb_grpc.RunServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self.approvals: Any = pb_grpc.ApprovalServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self.tools: Any = pb_grpc.ToolHostServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self.system: Any = pb_grpc.SystemServiceStub(self.channel)  # type: ignore[no-untyped-call]

    async def __aenter__(self) -> SidecarClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel."""
        await self.channel.close()

    async def ready(self, within: float = 10.0) -> None:
        """Wait until the channel is connected (e.g. after a sidecar restart)."""
        await asyncio.wait_for(self.channel.channel_ready(), within)

    async def server_info(self) -> pb.ServerInfo:
        """Versions and capabilities."""
        info: pb.ServerInfo = await self.system.GetServerInfo(
            pb.GetServerInfoRequest(), metadata=self.metadata
        )
        return info

    async def start_run(self, request: pb.StartRunRequest) -> pb.StartRunResponse:
        """Start a run (a ``request_id`` is filled in when missing)."""
        if not request.request_id:
            request.request_id = str(uuid.uuid4())
        response: pb.StartRunResponse = await self.runs.StartRun(request, metadata=self.metadata)
        return response

    async def get_run(self, run_id: str, *, full: bool = False) -> pb.Run:
        """A run's state (``full`` adds tasks and result)."""
        view = pb.RUN_VIEW_FULL if full else pb.RUN_VIEW_BASIC
        run: pb.Run = await self.runs.GetRun(
            pb.GetRunRequest(run_id=run_id, view=view), metadata=self.metadata
        )
        return run

    async def list_runs(self, *statuses: pb.RunStatus) -> list[pb.Run]:
        """Every run (newest first), optionally only in ``statuses``."""
        runs: list[pb.Run] = []
        token = ""
        while True:
            request = pb.ListRunsRequest(page_size=500, page_token=token, statuses=statuses)
            page = await self.runs.ListRuns(request, metadata=self.metadata)
            runs.extend(page.runs)
            token = page.next_page_token
            if not token:
                return runs

    async def watch(
        self,
        run_id: str,
        *,
        after_seq: int = 0,
        allow_gap: bool = True,
        follow_suspended: bool = False,
        journal: bool = False,
        progress: bool = False,
    ) -> AsyncIterator[pb.RunEvent]:
        """The run's events after ``after_seq`` until it ends (heartbeats skipped).

        By default the run's journal, its one durable log (seq = journal seq, on any sidecar,
        across restarts and adoptions), with the sidecar's live notices (seq 0) between; a run
        that keeps no journal (a memory store) streams its progress events. ``journal``: the
        journal or ``JOURNAL_UNAVAILABLE``; ``progress``: the progress events in any case.
        """
        request = pb.WatchRunRequest(
            run_id=run_id,
            after_seq=after_seq,
            allow_gap=allow_gap,
            follow_suspended=follow_suspended,
            journal=journal,
            progress=progress,
        )
        call = self.runs.WatchRun(request, metadata=self.metadata)
        try:
            async for event in call:
                if event.type != "heartbeat":
                    yield event
        finally:
            call.cancel()

    async def restore_run(self, run_id: str) -> pb.RestoreRunResponse:
        """Resume a run from its checkpoint."""
        response: pb.RestoreRunResponse = await self.runs.RestoreRun(
            pb.RestoreRunRequest(run_id=run_id), metadata=self.metadata
        )
        return response

    async def cancel_run(self, run_id: str, reason: str = "") -> pb.Run:
        """Ask a run to stop."""
        run: pb.Run = await self.runs.CancelRun(
            pb.CancelRunRequest(run_id=run_id, reason=reason), metadata=self.metadata
        )
        return run

    async def delete_run(self, run_id: str) -> int:
        """Delete a run no sidecar executes; how many stored keys went."""
        response: pb.DeleteRunResponse = await self.runs.DeleteRun(
            pb.DeleteRunRequest(run_id=run_id), metadata=self.metadata
        )
        return response.deleted_keys

    async def list_approvals(self, run_id: str = "") -> list[pb.Approval]:
        """Pending approvals (of one run, or all)."""
        response = await self.approvals.ListApprovals(
            pb.ListApprovalsRequest(run_id=run_id), metadata=self.metadata
        )
        return list(response.approvals)

    async def decide_approval(
        self, approval: pb.Approval, *, approve: bool, reviewer: str
    ) -> pb.DecideApprovalResponse:
        """Decide ``approval`` on the hash of the content that was shown."""
        decision = pb.DecideApprovalRequest.DECISION_APPROVE
        if not approve:
            decision = pb.DecideApprovalRequest.DECISION_REJECT
        request = pb.DecideApprovalRequest(
            id=approval.id,
            request_hash=approval.request_hash,
            decision=decision,
            reviewer=pb.Reviewer(id=reviewer),
        )
        response: pb.DecideApprovalResponse = await self.approvals.DecideApproval(
            request, metadata=self.metadata
        )
        return response


@dataclass(frozen=True, slots=True, kw_only=True)
class HostTool:
    """A tool served by this process: ``handler(input, call) -> text`` (raise for an error)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    handler: Callable[[dict[str, Any], pb.ToolCall], Awaitable[str]]
    consequential: bool = False

    def definition(self) -> pb.ToolDefinition:
        """The wire definition."""
        return pb.ToolDefinition(
            name=self.name,
            description=self.description,
            input_schema_json=json.dumps(dict(self.input_schema)),
            consequential=self.consequential,
        )


@dataclass(slots=True)
class HostLedger:
    """What a host saw: every delivery, and the ack of every result it sent."""

    deliveries: list[pb.ToolCall] = field(default_factory=list)
    acks: dict[str, int] = field(default_factory=dict)  # call_id -> ResultAck.Status
    sent: dict[str, str] = field(default_factory=dict)  # call_id -> idempotency key

    def committed_keys(self) -> set[str]:
        """Idempotency keys whose result the sidecar acknowledged as committed."""
        committed = pb.ResultAck.STATUS_COMMITTED
        return {self.sent[c] for c, status in self.acks.items() if status == committed}


class HostTools:
    """Serves ``tools`` over Connect until :meth:`stop`, reconnecting when the stream drops.

    Args:
        client: the client whose channel to use.
        host_id: stable across reconnects (calls outstanding on a dropped session come back to
            the same host id first).
        tools: the tools.
        max_concurrent: calls outstanding at once.
    """

    def __init__(
        self,
        client: SidecarClient,
        host_id: str,
        tools: list[HostTool],
        *,
        max_concurrent: int = 16,
    ) -> None:
        self._client = client
        self.host_id = host_id
        self._tools = {tool.name: tool for tool in tools}
        self._max = max_concurrent
        self.ledger = HostLedger()
        self.registered = asyncio.Event()
        self._stopping = False

    async def run(self, *, reconnect_delay: float = 0.2) -> None:
        """Keep a session open until :meth:`stop` (reconnects after errors)."""
        while not self._stopping:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await self._session()
            self.registered.clear()
            if not self._stopping:
                await asyncio.sleep(reconnect_delay)

    def stop(self) -> None:
        """End the loop after the current session."""
        self._stopping = True

    async def _session(self) -> None:
        outgoing: asyncio.Queue[pb.ToolHostMessage | None] = asyncio.Queue()
        register = pb.Register(
            host_id=self.host_id,
            tools=[tool.definition() for tool in self._tools.values()],
            max_concurrent_calls=self._max,
        )
        await outgoing.put(pb.ToolHostMessage(register=register))

        async def messages() -> AsyncIterator[pb.ToolHostMessage]:
            while (message := await outgoing.get()) is not None:
                yield message

        call = self._client.tools.Connect(messages(), metadata=self._client.metadata)
        error: grpc.aio.AioRpcError | None = None
        handlers: set[asyncio.Task[None]] = set()
        async with asyncio.TaskGroup() as group:
            try:
                async for message in call:
                    kind = message.WhichOneof("msg")
                    if kind == "register_ack":
                        self.registered.set()
                    elif kind == "call":
                        task = group.create_task(self._serve(message.call, outgoing))
                        handlers.add(task)
                        task.add_done_callback(handlers.discard)
                    elif kind == "result_ack":
                        self.ledger.acks[message.result_ack.call_id] = message.result_ack.status
                    if self._stopping:
                        break
            except grpc.aio.AioRpcError as exc:
                error = exc  # raised below, outside the task group (not as an ExceptionGroup)
            finally:
                await outgoing.put(None)
                call.cancel()
                for task in handlers:
                    task.cancel()
        if error is not None:
            raise error

    async def _serve(
        self, call: pb.ToolCall, outgoing: asyncio.Queue[pb.ToolHostMessage | None]
    ) -> None:
        self.ledger.deliveries.append(call)
        result = pb.ToolResult(call_id=call.call_id, tool_call_id=call.tool_call_id)
        tool = self._tools.get(call.tool_name)
        try:
            if tool is None:
                raise LookupError(f"this host has no tool {call.tool_name!r}")
            text = await tool.handler(json.loads(call.input_json or "{}"), call)
            result.success.output_text = text
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            result.error.message = f"{type(exc).__name__}: {exc}"
        self.ledger.sent[call.call_id] = call.idempotency_key
        await outgoing.put(pb.ToolHostMessage(result=result))


# -- the example flow ------------------------------------------------------------------------


def example_request(run_id: str) -> pb.StartRunRequest:
    """Two dependent tasks on the scripted model; the agent calls the host tool ``lookup``."""
    script = pb.ScriptedModel(
        turns=[
            pb.ScriptedTurn(
                text="Let me look that up.",
                tool_calls=[pb.ScriptedToolCall(name="lookup", input_json='{"query": "sidecar"}')],
            ),
            pb.ScriptedTurn(text="Found: {{last_tool_result}}"),
        ]
    )
    agent = pb.AgentSpec(name="researcher", provider="scripted", tools=["lookup"], scripted=script)
    return pb.StartRunRequest(
        run_id=run_id,
        request_id=str(uuid.uuid4()),
        team=pb.TeamSpec(name="example", agents=[agent]),
        tasks=pb.TasksMode(
            tasks=[
                pb.TaskSpec(id="research", title="Research", description="Find the facts."),
                pb.TaskSpec(
                    id="write", title="Write", description="Summarize.", depends_on=["research"]
                ),
            ]
        ),
    )


async def example(address: str, token: str) -> pb.Run:
    """Start a run whose tool runs here, print its events, return the finished run."""

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        # Deduplicate side effects on call.idempotency_key: a call can be delivered again.
        return f"3 documents about {arguments['query']!r}"

    tool = HostTool(
        name="lookup",
        description="Search the knowledge base.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
        handler=lookup,
    )
    async with SidecarClient(address, token) as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "example-host", [tool])
        serving = group.create_task(host.run())
        try:
            await asyncio.wait_for(host.registered.wait(), 10)
            started = await client.start_run(example_request(f"example-{uuid.uuid4().hex[:8]}"))
            run_id = started.run.run_id
            print(f"started {run_id}")
            async for event in client.watch(run_id):
                print(f"  #{event.seq} {event.type} {event.task_id}".rstrip())
            run = await client.get_run(run_id, full=True)
            for task in run.tasks:
                print(f"{task.title}: {task.result}")
            return run
        finally:
            host.stop()
            serving.cancel()


def main(argv: list[str] | None = None) -> int:
    """``python -m sidecar.client``: run the example flow against a running sidecar."""
    parser = argparse.ArgumentParser(description="Run the example flow against a sidecar.")
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--token-file", type=Path, default=Path.home() / ".oma" / "sidecar.token")
    args = parser.parse_args(argv)
    token = os.environ.get("OMA_SIDECAR_TOKEN") or args.token_file.read_text().strip()
    run = asyncio.run(example(args.address, token))
    return 0 if run.status == pb.RUN_STATUS_COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Malformed requests: INVALID_ARGUMENT naming the field, with ErrorInfo and the reason trailer."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import grpc
import pytest
from sidecar_helpers import run_request
from test_sidecar_auth import error_info

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import error_reason
from sidecar.status import MAX_MESSAGE_CHARS, MAX_METADATA_CHARS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from sidecar.client import SidecarClient
    from sidecar.server import Sidecar


async def read_until_error(call: grpc.aio.StreamStreamCall) -> None:
    while await call.read() is not grpc.aio.EOF:
        pass


DEEP = "{" + '"a":{' * 50_000 + "}" * 50_001


def _edit(change: Callable[[pb.StartRunRequest], object]) -> pb.StartRunRequest:
    request = run_request("run-e", tools=("echo",), arguments={"text": "x"})
    change(request)
    return request


def _cycle(request: pb.StartRunRequest) -> None:
    request.tasks.tasks[0].depends_on.append("t2")


CASES = [
    ("request_id", "VALIDATION", lambda r: r.ClearField("request_id")),
    ("run_id", "VALIDATION", lambda r: setattr(r, "run_id", "bad id/")),
    ("team", "VALIDATION", lambda r: r.ClearField("team")),
    ("team.agents", "VALIDATION", lambda r: r.team.ClearField("agents")),
    ("team.agents[0].name", "VALIDATION", lambda r: setattr(r.team.agents[0], "name", " ")),
    ("team.agents[0].provider", "VALIDATION", lambda r: setattr(r.team.agents[0], "provider", "x")),
    (
        "team.agents[0].tools[0]",
        "UNKNOWN_TOOL",
        lambda r: r.team.agents[0].tools.__setitem__(0, "nope"),
    ),
    ("mode", "VALIDATION", lambda r: r.ClearField("tasks")),
    (
        "tasks.tasks[1].description",
        "VALIDATION",
        lambda r: setattr(r.tasks.tasks[1], "description", ""),
    ),
    (
        "tasks.tasks[0].assignee",
        "VALIDATION",
        lambda r: setattr(r.tasks.tasks[0], "assignee", "ghost"),
    ),
    ("tasks.tasks[1].depends_on", "INVALID_TASK_DEPENDENCIES", _cycle),
    (  # "a:b" + call "c" and "a" + call "b:c" would share one idempotency key
        "tasks.tasks[0].id",
        "VALIDATION",
        lambda r: setattr(r.tasks.tasks[0], "id", "a:b"),
    ),
    (
        "tasks.tasks[1].depends_on[0]",
        "INVALID_TASK_DEPENDENCIES",
        lambda r: r.tasks.tasks[1].depends_on.__setitem__(0, "missing"),
    ),
    (
        "checkpoint.store_uri",
        "UNKNOWN_STORE_SCHEME",
        lambda r: setattr(r.checkpoint, "store_uri", "mysql://localhost"),
    ),
    (
        "checkpoint.store_uri",
        "VALIDATION",
        lambda r: setattr(r.checkpoint, "store_uri", "file://x"),
    ),
    (
        "team.agents[0].scripted.turns[0].tool_calls[0].input_json",
        "VALIDATION",
        lambda r: setattr(r.team.agents[0].scripted.turns[0].tool_calls[0], "input_json", "{"),
    ),
    ("max_concurrency", "VALIDATION", lambda r: setattr(r, "max_concurrency", -1)),
    (
        "team.host_tools[0]",
        "VALIDATION",
        lambda r: r.team.host_tools.add(name="t", input_schema_json='{"type": "array"}'),
    ),
    # Issue 12 item 8: each of these used to leave with another code than INVALID_ARGUMENT.
    ("run_id", "VALIDATION", lambda r: setattr(r, "run_id", "ab\n")),  # "$" with match
    ("run_id", "VALIDATION", lambda r: setattr(r, "run_id", "ab:cd")),  # as the proto says
    (  # RecursionError: INTERNAL
        "team.host_tools[0]",
        "VALIDATION",
        lambda r: r.team.host_tools.add(name="t", input_schema_json="[" * 100_000),
    ),
    (
        "team.agents[0].scripted.turns[0].tool_calls[0].input_json",
        "VALIDATION",
        lambda r: setattr(r.team.agents[0].scripted.turns[0].tool_calls[0], "input_json", DEEP),
    ),
    (  # ValueError "embedded null byte": INTERNAL
        "checkpoint.store_uri",
        "VALIDATION",
        lambda r: setattr(r.checkpoint, "store_uri", "file:///tmp/state%00.json"),
    ),
    (  # ENAMETOOLONG on read: DATA_LOSS
        "checkpoint.store_uri",
        "VALIDATION",
        lambda r: setattr(r.checkpoint, "store_uri", "file:///tmp/" + "a" * 5000),
    ),
    (  # a device (the fixture's sidecar has a memory store: no file store is allowed)
        "checkpoint.store_uri",
        "STORE_OUTSIDE_ROOT",
        lambda r: setattr(r.checkpoint, "store_uri", "file:///dev/null"),
    ),
    (  # item 6: a new file anywhere the sidecar can write
        "checkpoint.store_uri",
        "STORE_OUTSIDE_ROOT",
        lambda r: setattr(r.checkpoint, "store_uri", "file:///etc/oma-intruder.json"),
    ),
    (  # item 4: another run's (or the registry's) records
        "checkpoint.key",
        "VALIDATION",
        lambda r: setattr(r.checkpoint, "key", "__oma_sidecar__/run/victim"),
    ),
    (
        "checkpoint.key",
        "VALIDATION",
        lambda r: setattr(r.checkpoint, "key", "__oma_checkpoint__/victim/latest"),
    ),
]


@pytest.mark.parametrize(
    ("field", "reason", "change"), CASES, ids=[c[0] + ":" + c[1] for c in CASES]
)
async def test_malformed_start_names_the_field(
    client: SidecarClient, field: str, reason: str, change: Callable[[pb.StartRunRequest], object]
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.runs.StartRun(_edit(change), metadata=client.metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    info = error_info(caught.value)
    assert (info.reason, info.metadata["field"]) == (reason, field)
    assert error_reason(caught.value) == reason
    assert caught.value.details().startswith(field)


async def test_plan_version_and_plan_dependencies_are_checked(client: SidecarClient) -> None:
    request = run_request("run-p", tools=("echo",), arguments={"text": "x"})
    request.plan.version = 2
    request.plan.tasks.add(id="a", title="A", description="do A")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(request)
    assert error_info(caught.value).reason == "UNSUPPORTED_PLAN_VERSION"
    request.plan.version = 1
    request.plan.tasks.add(id="b", title="B", description="do B", depends_on=["A"])  # a title
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(request)
    assert error_info(caught.value).metadata["field"] == "plan.tasks[1].depends_on[0]"
    request.plan.tasks[1].depends_on[0] = "a"
    assert (await client.start_run(request)).created


async def test_an_approval_gate_on_a_tool_the_run_cannot_have_is_refused(
    client: SidecarClient,
) -> None:
    # A gate on a tool no agent can get (not a Python tool, not declared, not registered by a
    # host) would guard nothing: it used to be accepted silently.
    request = run_request("run-g", tools=("echo",), arguments={"text": "x"})
    request.approval_gates.tool_calls.extend(["echo", "wire_money"])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = error_info(caught.value)
    assert (info.reason, info.metadata["field"]) == ("UNKNOWN_TOOL", "approval_gates.tool_calls[1]")
    assert "'wire_money'" in caught.value.details()
    assert await client.list_runs() == []
    # A declared host tool is one the run can have, connected host or not.
    request.team.host_tools.add(name="wire_money", input_schema_json='{"type": "object"}')
    assert (await client.start_run(request)).created


async def test_connect_must_start_with_register(client: SidecarClient) -> None:
    async def messages() -> AsyncIterator[pb.ToolHostMessage]:
        yield pb.ToolHostMessage(drain=pb.Drain())

    call = client.tools.Connect(messages(), metadata=client.metadata)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in call:
            pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "REGISTER_REQUIRED"


async def test_register_rejects_bad_tools_and_needs_a_host_id(client: SidecarClient) -> None:
    queue: asyncio.Queue[pb.ToolHostMessage | None] = asyncio.Queue()

    async def messages() -> AsyncIterator[pb.ToolHostMessage]:
        while (message := await queue.get()) is not None:
            yield message

    register = pb.Register(
        host_id="h",
        tools=[
            pb.ToolDefinition(name="good", input_schema_json='{"type": "object"}'),
            pb.ToolDefinition(name="bad name", input_schema_json='{"type": "object"}'),
            pb.ToolDefinition(name="echo", input_schema_json='{"type": "object"}'),
            pb.ToolDefinition(name="broken", input_schema_json="{nope"),
        ],
    )
    await queue.put(pb.ToolHostMessage(register=register))
    call = client.tools.Connect(messages(), metadata=client.metadata)
    first = await call.read()
    assert list(first.register_ack.accepted_tools) == ["good"]
    assert set(first.register_ack.rejected_tools) == {"bad name", "echo", "broken"}
    await queue.put(pb.ToolHostMessage(register=register))  # twice: malformed
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await read_until_error(call)
    assert error_info(caught.value).metadata["field"] == "register"
    call = client.tools.Connect(
        iter([pb.ToolHostMessage(register=pb.Register())]), metadata=client.metadata
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    assert error_info(caught.value).metadata["field"] == "register.host_id"


async def test_a_host_message_carrying_nothing_is_refused(client: SidecarClient) -> None:
    registered = pb.ToolHostMessage(register=pb.Register(host_id="h"))
    call = client.tools.Connect(iter([registered, pb.ToolHostMessage()]), metadata=client.metadata)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await read_until_error(call)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == "msg"


async def test_watch_and_get_validate_their_arguments(client: SidecarClient) -> None:
    unknown_view = pb.GetRunRequest(run_id="a", view=9)  # type: ignore[arg-type]
    bad = [
        client.runs.GetRun(pb.GetRunRequest(run_id=""), metadata=client.metadata),
        client.runs.GetRun(unknown_view, metadata=client.metadata),
        client.runs.ListRuns(pb.ListRunsRequest(page_token="zz"), metadata=client.metadata),
        # A digit to str.isdigit(), not to int(): found by the fuzz test as INTERNAL.
        client.runs.ListRuns(pb.ListRunsRequest(page_token="\u00b2"), metadata=client.metadata),
        client.runs.ListRuns(pb.ListRunsRequest(page_size=501), metadata=client.metadata),
        client.runs.ListRuns(
            pb.ListRunsRequest(statuses=[99]),  # type: ignore[list-item]
            metadata=client.metadata,
        ),
    ]
    fields = ["run_id", "view", "page_token", "page_token", "page_size", "statuses"]
    for call, field in zip(bad, fields, strict=True):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).metadata["field"] == field
    stream = client.runs.WatchRun(
        pb.WatchRunRequest(run_id="a", after_seq=-1), metadata=client.metadata
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stream.read()
    assert error_info(caught.value).metadata["field"] == "after_seq"


@pytest.mark.parametrize(
    "method",
    [
        "/oma.v1.RunService/StartRun",
        "/oma.v1.RunService/GetRun",
        "/oma.v1.SystemService/GetServerInfo",
    ],
)
async def test_undecodable_requests_are_invalid_argument_naming_the_request(
    client: SidecarClient, sidecar: Sidecar, method: str
) -> None:
    async with grpc.aio.insecure_channel(sidecar.address) as channel:
        call = channel.unary_unary(method)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(b"\xff\xff\xff", metadata=client.metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    info = error_info(caught.value)
    assert (info.reason, info.metadata["field"]) == ("VALIDATION", "request")


async def test_undecodable_stream_messages_are_invalid_argument(
    client: SidecarClient, sidecar: Sidecar
) -> None:
    async with grpc.aio.insecure_channel(sidecar.address) as channel:
        watch = channel.unary_stream("/oma.v1.RunService/WatchRun")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in watch(b"\xff\xff", metadata=client.metadata):
                pass
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        connect = channel.stream_stream("/oma.v1.ToolHostService/Connect")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in connect(iter([b"\xff\xff"]), metadata=client.metadata):
                pass
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).metadata["field"] == "request"


async def test_a_lookup_of_a_run_id_with_a_newline_is_invalid(client: SidecarClient) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.runs.GetRun(pb.GetRunRequest(run_id="ab\n"), metadata=client.metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_huge_id_is_not_echoed_whole_into_the_error(client: SidecarClient) -> None:
    # Issue 24, item 8: a 1 MB approval id quoted in the message and the ErrorInfo metadata
    # made the trailers exceed gRPC's limit: the client saw RESOURCE_EXHAUSTED, not the error.
    huge = "a" * 1_000_000
    get = client.approvals.GetApproval(pb.GetApprovalRequest(id=huge), metadata=client.metadata)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await get
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(caught.value) == "APPROVAL_NOT_FOUND"
    details = caught.value.details() or ""
    assert len(details) <= MAX_MESSAGE_CHARS
    assert "… (" in details
    assert "more characters" in details
    shown = error_info(caught.value).metadata["id"]
    assert shown.startswith("a" * (MAX_METADATA_CHARS // 2))
    assert shown.endswith("more characters)")
    assert len(shown) <= MAX_METADATA_CHARS

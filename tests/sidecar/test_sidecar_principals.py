"""Principals (``oma serve --principals``): tenants over every RPC, roles, reviewers, the file."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import (
    ECHO,
    LOOKUP_SCHEMA,
    answer,
    legacy_record_text,
    lookup_tool,
    run_request,
)
from test_sidecar_auth import error_info

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.access import METHOD_ROLES, allowed
from sidecar.client import HostTool, HostTools, SidecarClient, error_reason
from sidecar.principals import (
    MAX_ENTRIES,
    Principal,
    Principals,
    PrincipalsError,
    parse_entries,
)
from sidecar.server import ServerConfig, Sidecar
from sidecar.status import Unauthenticated
from sidecar.tenancy import Tenancy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

ENTRIES = [
    {"token": "alice-" + "a" * 26, "principal": "alice", "tenant": "acme",
     "roles": ["runs", "reviewer"]},
    {"token": "bob-" + "b" * 28, "principal": "bob", "tenant": "globex",
     "roles": ["runs", "reviewer", "host"]},
    {"token": "acme-host-" + "h" * 22, "principal": "acme-host", "tenant": "acme",
     "roles": ["host"]},
    {"token": "nobody-" + "n" * 25, "principal": "nobody", "tenant": "acme", "roles": []},
    {"token": "root-" + "r" * 27, "principal": "root", "tenant": "acme", "roles": ["admin"]},
    {"token": "ops-" + "o" * 28, "principal": "ops", "tenant": "acme",
     "roles": ["runs", "admin"]},
]  # fmt: skip
TOKENS = {str(entry["principal"]): str(entry["token"]) for entry in ENTRIES}
SERVICES = [service for service in pb.DESCRIPTOR.services_by_name.values()]
ALL_METHODS = sorted(
    f"/{service.full_name}/{method.name}" for service in SERVICES for method in service.methods
)
RUN = "acme-run"


def write_principals(path: Path, entries: object, mode: int = 0o600) -> Path:
    path.write_text(json.dumps(entries))
    os.chmod(path, mode)
    return path


def principals_config(tmp_path: Path, entries: object = ENTRIES, **changes: object) -> ServerConfig:
    """A sidecar's settings whose callers are the principals of ``entries`` (no shared token),
    on the memory store with the ``echo`` tool; ``changes`` override any setting."""
    settings: dict[str, object] = {
        "token": "",
        "principals": Principals.from_file(write_principals(tmp_path / "p.json", entries)),
        "listen": "127.0.0.1:0",
        "store_uri": "memory://",
        "python_tools": {"echo": ECHO},
        "heartbeat_s": 0.5,
        "grace_s": 0.1,
    }
    settings.update(changes)
    return ServerConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Sidecar]:
    """A sidecar whose callers are the principals of ``ENTRIES``."""
    config = principals_config(tmp_path)
    async with Sidecar(config) as sidecar:
        yield sidecar


@pytest.fixture
async def clients(server: Sidecar) -> AsyncIterator[dict[str, SidecarClient]]:
    """A client per principal, by principal name."""
    async with contextlib.AsyncExitStack() as stack:
        yield {
            name: await stack.enter_async_context(SidecarClient(server.address, token))
            for name, token in TOKENS.items()
        }


async def suspended_run(client: SidecarClient, run_id: str = RUN) -> pb.Approval:
    """Start a run that suspends at an approval gate; its pending approval."""
    request = run_request(run_id, tools=("echo",), arguments={"text": "hi"}, task_ids=("t1",))
    request.approval_gates.tool_calls.append("echo")
    request.request_id = f"{run_id}-request"
    await client.start_run(request)
    events = [event async for event in client.watch(run_id)]
    assert events[-1].run_status.status == pb.RUN_STATUS_SUSPENDED
    [approval] = await client.list_approvals(run_id)
    return approval


async def not_found(call: Awaitable[Any], reason: str = "RUN_NOT_FOUND") -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(caught.value) == reason


@contextlib.asynccontextmanager
async def hosting(host: HostTools) -> AsyncIterator[HostTools]:
    async with asyncio.TaskGroup() as group:
        task = group.create_task(host.run(reconnect_delay=0.05))
        await asyncio.wait_for(host.registered.wait(), 5)
        try:
            yield host
        finally:
            host.stop()
            task.cancel()


def host_tool_request(run_id: str) -> pb.StartRunRequest:
    """A run calling the host tool ``lookup``, declared in the request (no host needed)."""
    request = run_request(run_id, task_ids=("t1",))
    request.team.host_tools.append(lookup_tool(answer).definition())
    return request


# -- one case per RPC: what another tenant sees of acme's run ------------------------------


async def case_start(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    alice, bob = c["alice"], c["bob"]
    taken = run_request(RUN, tools=("echo",), task_ids=("t1",))
    taken.conflict_policy = pb.CONFLICT_POLICY_USE_EXISTING
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bob.start_run(taken)  # USE_EXISTING attaches to no run of another tenant
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert dict(error_info(caught.value).metadata) == {}  # nothing of acme's run is told
    # The same request_id in another tenant starts a run of its own.
    mine = run_request("", tools=("echo",), task_ids=("t1",))
    mine.request_id = f"{RUN}-request"
    started = await bob.start_run(mine)
    assert started.created
    assert started.run.run_id != RUN
    assert started.run.run_id not in {run.run_id for run in await alice.list_runs()}


async def case_get(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    await not_found(c["bob"].get_run(RUN))
    await not_found(c["bob"].get_run(RUN, full=True))


async def case_list(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    assert RUN not in {run.run_id for run in await c["bob"].list_runs()}
    assert RUN in {run.run_id for run in await c["alice"].list_runs()}


async def case_watch(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    async def watch() -> None:
        async for _ in c["bob"].watch(RUN):
            pass

    await not_found(watch())


async def case_restore(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    await not_found(c["bob"].restore_run(RUN))


async def case_cancel(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    await not_found(c["bob"].cancel_run(RUN))


async def case_delete(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    await not_found(c["bob"].delete_run(RUN))


async def case_timeline(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    bob = c["bob"]
    request = pb.GetRunTimelineRequest(run_id=RUN)
    await not_found(bob.runs.GetRunTimeline(request, metadata=bob.metadata))


async def case_history(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    bob = c["bob"]
    request = pb.GetRunHistoryRequest(run_id=RUN)
    await not_found(bob.runs.GetRunHistory(request, metadata=bob.metadata))


async def case_fork(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    bob = c["bob"]
    request = pb.ForkRunRequest(run_id=RUN, at_seq=1, new_run_id="bob-fork")
    await not_found(bob.runs.ForkRun(request, metadata=bob.metadata))
    # Nothing was created: a child would belong to the parent's tenant, so alice would see it.
    assert "bob-fork" not in {run.run_id for run in await c["alice"].list_runs()}


async def case_list_approvals(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    await not_found(c["bob"].list_approvals(RUN))
    assert await c["bob"].list_approvals() == []
    assert [a.id for a in await c["alice"].list_approvals()] == [approval.id]


async def case_get_approval(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    bob = c["bob"]
    request = pb.GetApprovalRequest(id=approval.id)
    await not_found(bob.approvals.GetApproval(request, metadata=bob.metadata), "APPROVAL_NOT_FOUND")


async def case_decide(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    decide = c["bob"].decide_approval(approval, approve=True, reviewer="bob")
    await not_found(decide, "APPROVAL_NOT_FOUND")


async def case_connect(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    # bob's host offers the very tool acme's run calls: it must never get acme's call.
    alice = c["alice"]
    bob_host = HostTools(c["bob"], "bob-host", [lookup_tool(answer)])
    async with hosting(bob_host):
        await alice.start_run(host_tool_request("acme-tools"))
        async with contextlib.aclosing(alice.watch("acme-tools")) as events:
            async for event in events:
                if event.type == "tool_call_waiting":
                    break
        assert bob_host.ledger.deliveries == []
        acme_host = HostTools(c["acme-host"], "acme-host", [lookup_tool(answer)])
        async with hosting(acme_host):
            done = [event async for event in alice.watch("acme-tools")]
    assert done[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert bob_host.ledger.deliveries == []
    assert [call.run_id for call in acme_host.ledger.deliveries] == ["acme-tools"]


async def case_complete(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    delivered: asyncio.Queue[pb.ToolCall] = asyncio.Queue()
    release = asyncio.Event()

    async def held(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        delivered.put_nowait(call)
        await release.wait()
        return "acme's answer"

    tool = HostTool(name="lookup", description="x", input_schema=LOOKUP_SCHEMA, handler=held)
    acme_host = HostTools(c["acme-host"], "acme-host", [tool])
    async with hosting(acme_host):
        await c["alice"].start_run(host_tool_request("acme-tools"))
        call = await asyncio.wait_for(delivered.get(), 10)
        bob = c["bob"]
        forged = pb.ToolResult(call_id=call.call_id, tool_call_id=call.tool_call_id)
        forged.success.output_text = "bob's answer"
        reply = await bob.tools.CompleteToolCall(
            pb.CompleteToolCallRequest(result=forged), metadata=bob.metadata
        )
        assert reply.ack.status == pb.ResultAck.STATUS_UNKNOWN_CALL
        release.set()
        events = [event async for event in c["alice"].watch("acme-tools")]
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    done = await c["alice"].get_run("acme-tools", full=True)
    assert "acme's answer" in done.tasks[0].result
    assert "bob" not in done.tasks[0].result


async def case_server_info(c: dict[str, SidecarClient], approval: pb.Approval) -> None:
    info = await c["bob"].server_info()  # server-wide facts only: nothing of any run
    assert RUN not in str(info)


CASES: dict[str, Callable[[dict[str, SidecarClient], pb.Approval], Awaitable[None]]] = {
    "/oma.v1.RunService/StartRun": case_start,
    "/oma.v1.RunService/GetRun": case_get,
    "/oma.v1.RunService/ListRuns": case_list,
    "/oma.v1.RunService/WatchRun": case_watch,
    "/oma.v1.RunService/RestoreRun": case_restore,
    "/oma.v1.RunService/CancelRun": case_cancel,
    "/oma.v1.RunService/DeleteRun": case_delete,
    "/oma.v1.RunService/GetRunTimeline": case_timeline,
    "/oma.v1.RunService/GetRunHistory": case_history,
    "/oma.v1.RunService/ForkRun": case_fork,
    "/oma.v1.ApprovalService/ListApprovals": case_list_approvals,
    "/oma.v1.ApprovalService/GetApproval": case_get_approval,
    "/oma.v1.ApprovalService/DecideApproval": case_decide,
    "/oma.v1.ToolHostService/Connect": case_connect,
    "/oma.v1.ToolHostService/CompleteToolCall": case_complete,
    "/oma.v1.SystemService/GetServerInfo": case_server_info,
}


def test_every_rpc_has_a_tenant_case_and_a_role() -> None:
    # A new RPC fails here until it gets an isolation case below and a line in the role table.
    assert sorted(CASES) == ALL_METHODS
    assert set(ALL_METHODS) <= set(METHOD_ROLES)


@pytest.mark.parametrize("method", ALL_METHODS)
async def test_another_tenant_sees_nothing_of_a_run(
    clients: dict[str, SidecarClient], method: str
) -> None:
    alice = clients["alice"]
    approval = await suspended_run(alice)
    await CASES[method](clients, approval)
    # Whatever the other tenant tried, acme's run and approval are as they were.
    run = await alice.get_run(RUN)
    assert (run.status, run.attempt) == (pb.RUN_STATUS_SUSPENDED, 1)
    [still] = await alice.list_approvals(RUN)
    assert still.state == pb.APPROVAL_STATE_PENDING


# -- reviewers and roles ---------------------------------------------------------------------


async def test_the_reviewer_is_the_authenticated_principal(
    clients: dict[str, SidecarClient],
) -> None:
    alice = clients["alice"]
    approval = await suspended_run(alice)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await alice.decide_approval(approval, approve=True, reviewer="mallory")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_reason(caught.value) == "REVIEWER_MISMATCH"
    [still] = await alice.list_approvals(RUN)
    assert still.state == pb.APPROVAL_STATE_PENDING
    decided = await alice.decide_approval(approval, approve=True, reviewer="")
    assert decided.recorded
    assert decided.approval.decision.reviewer.id == "alice"


async def test_naming_oneself_as_reviewer_is_accepted(clients: dict[str, SidecarClient]) -> None:
    approval = await suspended_run(clients["alice"])
    decided = await clients["alice"].decide_approval(approval, approve=False, reviewer="alice")
    assert decided.approval.decision.reviewer.id == "alice"


def _raw_call(channel: grpc.aio.Channel, method: str) -> Any:
    identity = (lambda message: message, lambda raw: raw)
    service, name = method.strip("/").split("/")
    descriptor = pb.DESCRIPTOR.services_by_name[service.split(".")[-1]].methods_by_name[name]
    if descriptor.client_streaming:
        return channel.stream_stream(method, *identity)
    if descriptor.server_streaming:
        return channel.unary_stream(method, *identity)
    return channel.unary_unary(method, *identity)


async def _status_of(server: Sidecar, principal: str, method: str) -> grpc.StatusCode:
    return await status_with(server, TOKENS[principal], method)


async def status_with(server: Sidecar, token: str, method: str) -> grpc.StatusCode:
    """The status of an empty request to ``method`` with ``token`` (OK if it succeeded)."""
    metadata = (("authorization", f"Bearer {token}"),)
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = _raw_call(channel, method)
        try:
            if "ToolHostService/Connect" in method:
                async for _ in call(iter([b""]), metadata=metadata, timeout=5):
                    break
            elif "WatchRun" in method:
                async for _ in call(b"", metadata=metadata, timeout=5):
                    break
            else:
                await call(b"", metadata=metadata, timeout=5)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize("method", ALL_METHODS)
async def test_a_principal_without_the_role_is_denied(server: Sidecar, method: str) -> None:
    # "nobody" holds no role: every RPC that needs one is PERMISSION_DENIED before it runs.
    code = await _status_of(server, "nobody", method)
    if METHOD_ROLES[method]:
        assert code == grpc.StatusCode.PERMISSION_DENIED
    else:
        assert code != grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize(
    ("principal", "method"),
    [
        ("acme-host", "/oma.v1.RunService/StartRun"),
        ("acme-host", "/oma.v1.ApprovalService/DecideApproval"),
        ("root", "/oma.v1.RunService/GetRun"),
        ("alice", "/oma.v1.ToolHostService/Connect"),
        ("alice", "/oma.v1.ToolHostService/CompleteToolCall"),
    ],
)
async def test_roles_gate_their_rpcs(server: Sidecar, principal: str, method: str) -> None:
    assert await _status_of(server, principal, method) == grpc.StatusCode.PERMISSION_DENIED


async def test_deciding_needs_the_reviewer_role(tmp_path: Path) -> None:
    entries = [
        {"token": "t-runner" + "x" * 24, "principal": "runner", "tenant": "acme",
         "roles": ["runs"]},
    ]  # fmt: skip
    config = principals_config(tmp_path, entries)
    async with (
        Sidecar(config) as sidecar,
        SidecarClient(sidecar.address, "t-runner" + "x" * 24) as c,
    ):
        approval = await suspended_run(c)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await c.decide_approval(approval, approve=True, reviewer="runner")
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        [still] = await c.list_approvals(RUN)  # "runs" may see approvals, not decide them
        assert still.state == pb.APPROVAL_STATE_PENDING


def test_an_rpc_missing_from_the_role_table_is_refused() -> None:
    everyone = Principal(principal="p", tenant="t", roles=frozenset({"runs", "reviewer", "host",
                                                                      "admin"}))  # fmt: skip
    assert allowed("/oma.v1.RunService/GetRun", everyone)
    assert not allowed("/oma.v1.RunService/SomeNewRpc", everyone)


async def test_an_unknown_token_is_unauthenticated(server: Sidecar) -> None:
    async with SidecarClient(server.address, "not-a-principal") as stranger:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stranger.server_info()
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_listing_unreadable_records_needs_admin(
    server: Sidecar, clients: dict[str, SidecarClient]
) -> None:
    assert server.state is not None
    await server.state.set("__oma_sidecar__/run/broken", "{not json")
    # Its tenant cannot be read: only an admin is shown it.
    assert "broken" not in {run.run_id for run in await clients["alice"].list_runs()}
    shown = {run.run_id: run.status for run in await clients["ops"].list_runs()}
    assert shown["broken"] == pb.RUN_STATUS_UNREADABLE


async def test_a_run_without_a_tenant_is_no_principals_run(
    server: Sidecar, clients: dict[str, SidecarClient]
) -> None:
    # A record written before principals were configured (tenant "") belongs to no tenant.
    assert server.state is not None
    request = run_request("old-run", tools=("echo",), task_ids=("t1",))
    text = legacy_record_text(request, status="RUN_STATUS_COMPLETED")
    await server.state.set("__oma_sidecar__/run/old-run", text)
    await not_found(clients["alice"].get_run("old-run"))
    assert "old-run" not in {run.run_id for run in await clients["alice"].list_runs()}


# -- the principals file ---------------------------------------------------------------------


def test_tokens_are_compared_with_every_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    principals = Principals.from_file(write_principals(tmp_path / "p.json", ENTRIES))
    compared: list[bytes] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return real(a, b)

    monkeypatch.setattr("sidecar.principals.hmac.compare_digest", counting)
    first = principals.identify(TOKENS["alice"].encode())
    assert first is not None
    assert first.principal == "alice"
    assert len(compared) == len(ENTRIES)  # no early exit at the first entry's match
    compared.clear()
    assert principals.identify(b"unknown") is None
    assert len(compared) == len(ENTRIES)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o620, 0o602])
def test_a_file_accessible_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = write_principals(tmp_path / "p.json", ENTRIES, mode)
    with pytest.raises(PrincipalsError, match="group or others"):
        Principals.from_file(path)


GOOD = {"token": "t" * 32, "principal": "p", "tenant": "acme", "roles": ["runs"]}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "non-empty JSON list"),
        ({"token": "x"}, "non-empty JSON list"),
        (["x"], "entry 0: must be an object"),
        ([{**GOOD, "roles": ["runs", "sudo"]}], r"entry 0 \('p'\): unknown roles \['sudo'\]"),
        ([{**GOOD, "roles": "runs"}], "'roles' must be a list"),
        ([{**GOOD, "token": ""}], r"entry 0 \('p'\): 'token' must be a non-empty"),
        ([{**GOOD, "token": "   "}], "'token' must be a non-empty"),
        ([{**GOOD, "token": 7}], "'token' must be a non-empty"),
        ([{**GOOD, "token": " padded "}], "without outer spaces"),
        ([{**GOOD, "tenant": ""}], "'tenant' must be a non-empty"),
        ([{**GOOD, "principal": ""}], "'principal' must be a non-empty"),
        ([GOOD, {**GOOD, "principal": "q"}], r"entry 1 \('q'\): its token is already used"),
        ([GOOD, {**GOOD, "token": "u" * 32}], r"entry 1 \('p'\): the principal is already"),
        ([{k: v for k, v in GOOD.items() if k != "tenant"}], r"missing fields \['tenant'\]"),
        ([{**GOOD, "admin": True}], r"unknown fields \['admin'\]"),
    ],
)
def test_bad_entries_are_named(tmp_path: Path, document: object, message: str) -> None:
    path = write_principals(tmp_path / "p.json", document)
    with pytest.raises(PrincipalsError, match=message) as caught:
        Principals.from_file(path)
    assert "t" * 32 not in str(caught.value)  # a token never reaches the message


def test_a_principals_list_over_the_limit_is_refused_before_its_entries() -> None:
    # Counted first: a huge file is not walked entry by entry to find its first bad one.
    with pytest.raises(PrincipalsError, match=f"more than {MAX_ENTRIES} entries"):
        parse_entries(["x"] * (MAX_ENTRIES + 1), source="p.json")


def test_bad_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("[{")
    os.chmod(path, 0o600)
    with pytest.raises(PrincipalsError, match="not JSON"):
        Principals.from_file(path)


def test_serve_refuses_a_readable_principals_file_in_one_line(tmp_path: Path) -> None:
    path = write_principals(tmp_path / "p.json", ENTRIES, 0o644)
    process = subprocess.run(
        [sys.executable, "-m", "sidecar", "--listen", "127.0.0.1:0", "--store", "memory://",
         "--principals", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert process.returncode == 2
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("oma serve: --principals:")
    assert "group or others" in lines[0]


class _Context:
    """A call's context as the servicers read it: only its metadata."""

    def __init__(self, *metadata: tuple[str, str]) -> None:
        self._metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


@pytest.mark.parametrize(
    "metadata",
    [(), (("authorization", "Bearer not-a-token-of-anyone-at-all"),), (("authorization", "x"),)],
    ids=["no token", "unknown token", "not a bearer"],
)
def test_a_call_nobody_holds_is_unauthenticated_behind_the_interceptor_too(
    tmp_path: Path, metadata: tuple[tuple[str, str], ...]
) -> None:
    # The interceptor refuses such a call first; the servicers identify the caller again and
    # must not take "nobody" for "no principals" (which sees every tenant).
    tenancy = Tenancy(Principals.from_file(write_principals(tmp_path / "p.json", ENTRIES)))
    with pytest.raises(Unauthenticated):
        tenancy.caller(_Context(*metadata))
    alice = tenancy.caller(_Context(("authorization", f"Bearer {TOKENS['alice']}")))
    assert alice is not None
    assert (alice.principal, alice.tenant) == ("alice", "acme")
    assert Tenancy().caller(_Context()) is None  # no principals at all: every call is one

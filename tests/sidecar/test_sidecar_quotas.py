"""Client input is bounded: a request over the input quota, and a state file over its limit.

Issue 24, item 1: 22 StartRuns with 1M-character descriptions grew the state file past what the
FileStore reads back, and the sidecar could not boot again. Now every request meets the input
quota before anything of it is stored, and the store refuses a write it could not read back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, run_request
from test_sidecar_auth import error_info

from oma_actors.stores import file_io
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient, error_reason
from sidecar.quotas import largest_field
from sidecar.server import MIN_INPUT_BYTES, ServerConfig, ServerConfigError, Sidecar

if TYPE_CHECKING:
    from pathlib import Path


def echo_run(run_id: str, description: str) -> pb.StartRunRequest:
    request = run_request(run_id, tools=("echo",), arguments={"text": "x"}, task_ids=("t1", "t2"))
    request.tasks.tasks[1].description = description
    return request


def config_for(uri: str, **changes: object) -> ServerConfig:
    settings: dict[str, object] = {
        "token": TOKEN,
        "listen": "127.0.0.1:0",
        "store_uri": uri,
        "python_tools": {"echo": ECHO},
        "grace_s": 0.1,
        "journal": False,
    }
    settings.update(changes)
    return ServerConfig(**settings)  # type: ignore[arg-type]


def test_the_largest_field_is_named_by_its_path() -> None:
    request = echo_run("r", "d" * 5000)
    request.team.agents[0].system_prompt = "s" * 100
    assert largest_field(request) == "tasks.tasks[1].description"
    assert largest_field(pb.StartRunRequest()) == ""


def test_a_struct_member_is_named_by_its_key() -> None:
    # A Struct is a map of Values: its keys are strings, not messages to measure (the sidecar
    # answered UNKNOWN with an AttributeError for a big run or task metadata).
    request = echo_run("r", "d" * 100)
    request.metadata.update({"small": "s", "blob": "b" * 5000, "n": 3})
    assert largest_field(request) == 'metadata.fields["blob"].string_value'
    request = echo_run("r", "d" * 100)
    request.tasks.tasks[0].metadata.update({"note": "n" * 5000})
    assert largest_field(request) == 'tasks.tasks[0].metadata.fields["note"].string_value'


def test_a_nested_struct_and_list_member_is_named_down_to_its_leaf() -> None:
    request = echo_run("r", "d" * 100)
    request.metadata.update({"outer": {"list": ["a", "b" * 5000, {"x": 1}], "k": "v"}, "z": 1})
    assert largest_field(request) == (
        'metadata.fields["outer"].struct_value.fields["list"].list_value.values[1].string_value'
    )


def test_a_huge_map_key_is_named_cut_short() -> None:
    request = echo_run("r", "d" * 100)
    request.metadata.update({"k" * 5000: None, "other": "o" * 200})
    assert largest_field(request) == 'metadata.fields["' + "k" * 40 + '"...]'


def test_a_scalar_valued_map_entry_is_named_by_its_key() -> None:
    ack = pb.RegisterAck(accepted_tools=["a" * 100])
    ack.rejected_tools.update({"short": "r", "wordy": "why " * 1000, "x": ""})
    assert largest_field(ack) == 'rejected_tools["wordy"]'


def test_a_field_large_for_its_many_items_is_named_itself() -> None:
    # 3000 small ids outweigh a 1000-character description: depends_on is what to shorten.
    request = echo_run("r", "d" * 1000)
    request.tasks.tasks[1].depends_on.extend(f"id{index}" for index in range(3000))
    assert largest_field(request) == "tasks.tasks[1].depends_on"
    many = echo_run("r", "d")  # many small tasks: none of them is the one to shorten
    many.tasks.tasks.extend(pb.TaskSpec(id=f"t{index}") for index in range(3000))
    many.team.agents[0].system_prompt = "s" * 1000
    assert largest_field(many) == "tasks.tasks"
    one = echo_run("r", "d" * 1000)  # one big item among a few is named by its index
    one.tasks.tasks[1].depends_on.extend(["b" * 5000, "c"])  # after its "t1"
    assert largest_field(one) == "tasks.tasks[1].depends_on[1]"


async def test_a_request_too_large_in_its_metadata_is_refused_naming_the_member() -> None:
    config = config_for("memory://", max_input_bytes=MIN_INPUT_BYTES)
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        for where in ("run", "task"):
            request = echo_run(f"big-{where}", "d")
            struct = request.metadata if where == "run" else request.tasks.tasks[0].metadata
            struct.update({"blob": "b" * MIN_INPUT_BYTES})
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await client.start_run(request)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value
            assert error_reason(caught.value) == "INPUT_TOO_LARGE"
            prefix = "" if where == "run" else "tasks.tasks[0]."
            field = f'{prefix}metadata.fields["blob"].string_value'
            assert error_info(caught.value).metadata["field"] == field
        assert await client.list_runs() == []


async def test_a_request_over_the_input_quota_is_refused_before_it_is_stored(
    tmp_path: Path,
) -> None:
    config = config_for(f"file://{tmp_path / 'state.json'}", max_input_bytes=MIN_INPUT_BYTES)
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(echo_run("big", "d" * MIN_INPUT_BYTES))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(caught.value) == "INPUT_TOO_LARGE"
        assert error_info(caught.value).metadata["field"] == "tasks.tasks[1].description"
        assert await client.list_runs() == []
        result = pb.ToolResult(call_id="c", success=pb.ToolSuccess(output_text="o" * (1 << 17)))
        complete = client.tools.CompleteToolCall(
            pb.CompleteToolCallRequest(result=result), metadata=client.metadata
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:  # a host tool's result, too
            await complete
        assert error_reason(caught.value) == "INPUT_TOO_LARGE"
        assert error_info(caught.value).metadata["field"] == "result.success.output_text"
        await client.start_run(echo_run("small", "d" * (MIN_INPUT_BYTES // 2)))


async def test_many_large_starts_cannot_make_the_state_file_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.json"
    limit = 1 << 20
    monkeypatch.setattr(file_io, "MAX_STATE_BYTES", limit)  # the store's one read/write limit
    config = config_for(f"file://{state}", max_input_bytes=MIN_INPUT_BYTES)
    started: list[str] = []
    refused: grpc.aio.AioRpcError | None = None
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        for index in range(100):  # each run stores its spec in its record and its checkpoint
            try:
                await client.start_run(echo_run(f"r{index}", "d" * (MIN_INPUT_BYTES - 2048)))
            except grpc.aio.AioRpcError as exc:
                refused = exc
                break
            started.append(f"r{index}")
    assert refused is not None, "the store never filled up"
    assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused
    assert error_reason(refused) == "STORE_FULL"
    assert 0 < state.stat().st_size <= limit
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        listed = {run.run_id for run in await client.list_runs()}
        assert listed == set(started)


async def test_nonsense_durations_and_quotas_are_refused_at_startup() -> None:
    bad: list[dict[str, object]] = [
        {"heartbeat_s": 0.0},
        {"heartbeat_s": -5.0},
        {"heartbeat_s": float("nan")},
        {"host_call_timeout_s": float("nan")},
        {"host_call_timeout_s": float("inf")},
        {"lease_ttl_s": float("nan")},
        {"max_input_bytes": MIN_INPUT_BYTES - 1},
        {"max_input_bytes": (16 << 20) + 1},
    ]
    for changes in bad:
        with pytest.raises(ServerConfigError) as caught:
            async with Sidecar(config_for("memory://", **changes)):
                pass
        option = next(iter(changes)).removesuffix("_s").replace("_", "-")
        assert option.split("-")[0] in str(caught.value), (changes, caught.value)

"""Schema validation is bounded: size limits at registration, a step budget, off the loop.

Issue 24, item 2: one StartRun whose host tool had 1,500 ``anyOf`` branches with distinct
patterns, called with 3,000 items, kept the event loop busy for a minute: every RPC timed out.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

import grpc
import pytest
from pydantic import ValidationError
from sidecar_helpers import TOKEN

from sidecar import schema as schema_module
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient, error_reason
from sidecar.schema import (
    LOOP_STEPS,
    MAX_INSTANCE_BYTES,
    MAX_PATTERNS,
    MAX_SCHEMA_BYTES,
    MAX_SUBSCHEMAS,
    TooCostlyError,
    TooLargeError,
    check_off_loop,
    compile_schema,
    input_model,
    schema_problem,
    unchecked,
    validate,
)
from sidecar.server import ServerConfig, Sidecar


def branches_schema(branches: int, *, patterns: bool = True) -> dict[str, Any]:
    options = [
        {"type": "string", "pattern": f"^never{index}$"}
        if patterns
        else {"type": "string", "const": f"never{index}"}
        for index in range(branches)
    ]
    return {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"anyOf": options}}},
    }


def costly_items(branches: int, items: int) -> dict[str, list[str]]:
    """Items matching only the last branch (every branch is tried), the last matching none."""
    return {"items": [f"never{branches - 1}"] * (items - 1) + ["nothing"]}


def costly_request(run_id: str, branches: int, items: int) -> pb.StartRunRequest:
    arguments = costly_items(branches, items)
    script = pb.ScriptedModel(
        turns=[
            pb.ScriptedTurn(
                tool_calls=[pb.ScriptedToolCall(name="match", input_json=json.dumps(arguments))]
            ),
            pb.ScriptedTurn(text="done: {{last_tool_result}}"),
        ]
    )
    agent = pb.AgentSpec(name="worker", provider="scripted", tools=["match"], scripted=script)
    team = pb.TeamSpec(name="team", agents=[agent])
    team.host_tools.add(name="match", input_schema_json=json.dumps(branches_schema(branches)))
    return pb.StartRunRequest(
        run_id=run_id,
        request_id=str(uuid.uuid4()),
        team=team,
        tasks=pb.TasksMode(tasks=[pb.TaskSpec(id="t1", title="Match", description="Match.")]),
    )


def test_the_reported_schema_is_refused_at_registration() -> None:
    assert f"more than {MAX_PATTERNS} distinct patterns" in (
        schema_problem(branches_schema(1500)) or ""
    )
    assert f"more than {MAX_SUBSCHEMAS} subschemas" in (
        schema_problem(branches_schema(1500, patterns=False)) or ""
    )
    assert f"more than {MAX_PATTERNS} distinct patterns" in (
        schema_problem(branches_schema(MAX_PATTERNS + 1)) or ""
    )
    assert schema_problem(branches_schema(MAX_PATTERNS)) is None
    assert "unevaluatedProperties" in (
        schema_problem({"type": "object", "unevaluatedProperties": False}) or ""
    )
    assert "draft 2020-12" in (schema_problem({"type": "object", "minLength": "x"}) or "")


def test_a_costly_check_runs_out_of_steps_instead_of_running_on() -> None:
    compiled = compile_schema(branches_schema(MAX_PATTERNS))
    value = costly_items(MAX_PATTERNS, 3000)
    with pytest.raises(TooCostlyError) as caught:
        validate(compiled, value)
    assert caught.value.steps == LOOP_STEPS
    # The model's own check defers it (marked unchecked) rather than spending more steps.
    model = input_model("match", branches_schema(MAX_PATTERNS))
    assert unchecked(model.model_validate(value)) is not None
    assert unchecked(model.model_validate({"items": []})) is None


async def test_the_thread_check_decides_within_its_budget() -> None:
    compiled = compile_schema(branches_schema(MAX_PATTERNS))
    value = costly_items(MAX_PATTERNS, 30)
    problems = await check_off_loop(compiled, value)
    assert problems == ["$.items[29]: matches none of the anyOf schemas"]
    with pytest.raises(TooCostlyError, match="over 1000 steps"):
        await check_off_loop(compiled, value, steps=1000)
    with pytest.raises(TooCostlyError, match="over 0 seconds"):
        await check_off_loop(compiled, value, seconds=0.0)


def big_schema() -> dict[str, Any]:
    """A schema just over ``MAX_SCHEMA_BYTES`` whose other limits all hold."""
    return {"type": "object", "description": "x" * MAX_SCHEMA_BYTES}


async def test_an_oversized_schema_or_input_is_refused_naming_which() -> None:
    with pytest.raises(TooLargeError) as caught:
        compile_schema(big_schema())
    assert caught.value.what == "schema"
    assert caught.value.limit == MAX_SCHEMA_BYTES
    assert "input schema is" in str(caught.value)
    assert "input schema is" in (schema_problem(big_schema()) or "")

    compiled = compile_schema({"type": "object"})
    huge = {"text": "y" * MAX_INSTANCE_BYTES}
    with pytest.raises(TooLargeError) as caught:
        validate(compiled, huge)
    assert caught.value.what == "input"
    assert caught.value.size > MAX_INSTANCE_BYTES
    with pytest.raises(TooLargeError, match="the input is"):
        await check_off_loop(compiled, huge)
    # Through the host tool's model the model is told, and nothing reaches the host.
    with pytest.raises(ValidationError, match="the input is"):
        input_model("big", {"type": "object"}).model_validate(huge)
    # Just under the limit passes: the budget is a size, not a refusal of text.
    assert validate(compiled, {"text": "y" * (MAX_INSTANCE_BYTES - 100)}) == []


async def test_the_event_loop_keeps_turning_while_a_big_input_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker-thread check waits until the loop has ticked 100 times: were the check run
    # on the event loop, no tick could happen and it would give up (ticks stay at 0).
    ticked = threading.Event()
    ticks = 0
    original = schema_module._problems

    def held(compiled: Any, value: object, budget: Any) -> list[str]:
        ticked.wait(30)
        return original(compiled, value, budget)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1
            if ticks == 100:
                ticked.set()

    monkeypatch.setattr(schema_module, "_problems", held)
    compiled = compile_schema(branches_schema(MAX_PATTERNS))
    ticking = asyncio.create_task(ticker())
    try:
        problems = await check_off_loop(compiled, costly_items(MAX_PATTERNS, 30))
    finally:
        ticking.cancel()
    assert problems == ["$.items[29]: matches none of the anyOf schemas"]
    assert ticks >= 100


async def test_other_rpcs_answer_while_a_costly_input_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started, release = threading.Event(), threading.Event()
    original = schema_module._problems

    def held(compiled: Any, value: object, budget: Any) -> list[str]:
        if budget.seconds is not None:  # the worker thread's check, not the loop's
            started.set()
            release.wait(30)
            budget.__post_init__()  # its time budget starts now, not while the test holds it
        return original(compiled, value, budget)

    monkeypatch.setattr(schema_module, "_problems", held)
    server_config = ServerConfig(token=TOKEN, listen="127.0.0.1:0", store_uri="memory://")
    async with Sidecar(server_config) as server, SidecarClient(server.address, TOKEN) as client:
        await client.start_run(costly_request("costly", MAX_PATTERNS, 30))
        assert await asyncio.to_thread(started.wait, 30)
        try:
            # The check is under way in a worker thread: the loop still answers RPCs.
            run = await client.get_run("costly")
            assert run.status == pb.RUN_STATUS_RUNNING
            assert await client.server_info()
        finally:
            release.set()
        events = [event async for event in client.watch("costly")]
        assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
        run = await client.get_run("costly", full=True)
        assert "matches none of the anyOf schemas" in run.tasks[0].result, run.tasks[0].result

        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(costly_request("refused", 1500, 3000))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(caught.value) in ("VALIDATION", "INVALID_TOOL_SCHEMA")


async def test_registered_schemas_are_checked_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The meta-schema check of a large schema takes seconds: StartRun computes it in a worker
    # thread, and the check on the event loop finds the verdict cached.
    started, release = threading.Event(), threading.Event()
    on_loop: list[str] = []
    original = schema_module.schema_problem

    def held(schema: object) -> str | None:
        if threading.current_thread() is threading.main_thread():
            on_loop.append("schema_problem")
        else:
            started.set()
            release.wait(30)
        return original(schema)

    monkeypatch.setattr(schema_module, "schema_problem", held)
    request = costly_request("registering", MAX_PATTERNS, 1)
    schema = branches_schema(MAX_PATTERNS)
    schema["title"] = str(uuid.uuid4())  # a text no earlier test had cached
    request.team.host_tools[0].input_schema_json = json.dumps(schema)
    server_config = ServerConfig(token=TOKEN, listen="127.0.0.1:0", store_uri="memory://")
    async with Sidecar(server_config) as server, SidecarClient(server.address, TOKEN) as client:
        start = asyncio.create_task(client.start_run(request))
        assert await asyncio.to_thread(started.wait, 30)
        try:
            assert await client.server_info()  # answered while the schema is being checked
            assert not start.done()
        finally:
            release.set()
        assert (await start).created
    assert on_loop == []

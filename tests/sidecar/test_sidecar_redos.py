"""A model cannot freeze the sidecar: a pathological schema pattern leaves health checks fast.

Host tool input is validated on the event loop. With Python's backtracking ``re``, the pattern
``^(a+)+$`` against a run of "a"s and a "!" froze every run and RPC for seconds (21 s for 28
"a"s, issue 12 item 2); the linear-time matcher answers at once, so a health check made from
another process while the run validates that input still answers within a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sidecar_helpers import TOKEN

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.cli import LISTEN_LINE
from sidecar.client import SidecarClient

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ROOT = Path(__file__).resolve().parents[2]

EVIL = "^(a+)+$"
ATTACK = "a" * 26 + "!"  # about 2**26 backtracking steps: seconds with Python's re


def evil_request(run_id: str) -> pb.StartRunRequest:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}}
    script = pb.ScriptedModel(
        turns=[
            pb.ScriptedTurn(
                tool_calls=[pb.ScriptedToolCall(name="match", input_json=json.dumps({"s": ATTACK}))]
            ),
            pb.ScriptedTurn(text="done: {{last_tool_result}}"),
        ]
    )
    agent = pb.AgentSpec(name="worker", provider="scripted", tools=["match"], scripted=script)
    team = pb.TeamSpec(name="team", agents=[agent])
    team.host_tools.add(name="match", input_schema_json=json.dumps(schema))
    return pb.StartRunRequest(
        run_id=run_id,
        request_id=str(uuid.uuid4()),
        team=team,
        tasks=pb.TasksMode(tasks=[pb.TaskSpec(id="t1", title="Match", description="Match.")]),
    )


@contextlib.asynccontextmanager
async def sidecar_child() -> AsyncIterator[str]:
    """``python -m sidecar`` on a free port with a memory store; yields its address.

    A separate process, so the prober's timing is not skewed by the GIL that a backtracking
    ``re`` holds: it measures what a host sees.
    """
    env = {**os.environ, "OMA_SIDECAR_TOKEN": TOKEN}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sidecar", "--listen", "127.0.0.1:0", "--store", "memory://",
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode()
        assert line.startswith(LISTEN_LINE), line
        yield line.removeprefix(LISTEN_LINE).strip()
    finally:
        process.kill()
        await process.wait()


async def probe_health(address: str, stop: asyncio.Event, latencies: list[float]) -> None:
    """Check health every 20 ms until ``stop``; record how long each answer took."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            started = time.monotonic()
            try:
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
            except grpc.aio.AioRpcError:
                latencies.append(float("inf"))  # no answer within the second
                return
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.02)


async def test_a_health_check_answers_within_a_second_while_a_pathological_pattern_is_matched() -> (
    None
):
    stop = asyncio.Event()
    latencies: list[float] = []
    async with sidecar_child() as address, SidecarClient(address, TOKEN) as client:
        await client.ready()
        prober = asyncio.create_task(probe_health(address, stop, latencies))
        try:
            await asyncio.sleep(0.1)  # the prober is answered before the attack
            await client.start_run(evil_request("redos-1"))
            events = [event async for event in client.watch("redos-1")]
            await asyncio.sleep(0.1)
        finally:
            stop.set()
            await prober
        run = await client.get_run("redos-1", full=True)
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    # The input was validated (and refused) on the way: the model saw the validation error.
    assert "does not match pattern" in run.tasks[0].result, run.tasks[0].result
    assert len(latencies) >= 3
    assert max(latencies) < 1.0, latencies

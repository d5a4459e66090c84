"""The gRPC sidecar: BENCH.md P9 and P8, plus the host-tool round trip and watch throughput.

Servers run in child processes on uvloop (the sidecar as ``python -m sidecar``, the echo server
as this script with ``--echo-server``); the client is this process, a grpc.aio client. Figures:

* **P9**: unary round trip of ``GetRun`` (a finished run, auth interceptor on) vs a bare
  grpc.aio echo server (a generic handler returning its bytes), measured interleaved in the same
  run; the median of the repeats' p50s and the ratio (goal <= 1.5x).
* **tool call**: a run whose scripted (zero-latency) agent calls a host tool N times in a row.
  ``result -> ack`` is the time from the host sending a result to receiving ``ResultAck
  COMMITTED`` (includes the commit record's checkpoint save); ``call -> next call`` is one full
  model/tool turn as the host sees it (result, commit, tool-results save, model, next dispatch).
* **watch**: events per second replayed to one ``WatchRun`` from a finished run's history.
* **P8**: N runs started at once, each with two tasks whose agent calls a host tool; the host
  holds every call until all N runs have one outstanding (so N runs are in flight at once, each
  having checkpointed its assistant turn), then answers them all. Reports the in-flight peak, the
  wall time, checkpoint saves per second and the time per save, for two values of N (flat per-save
  latency is the goal).

Run: ``.venv/bin/python bench/sidecar.py [--repeats 3] [--p8 100,1000] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar._pb.oma.v1 import sidecar_pb2 as pb  # noqa: E402
from sidecar.client import HostTool, HostTools, SidecarClient  # noqa: E402

TOKEN = "bench-" + uuid.uuid4().hex
ECHO_METHOD = "/bench.Echo/Echo"


# -- the echo server (child process) ---------------------------------------------------------


async def echo_server() -> None:
    """A bare grpc.aio server whose one unary method returns the request bytes."""
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(_echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Echo", {"Echo": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"echo listening on 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


async def _echo(request: bytes, context: Any) -> bytes:
    return request


# -- helpers ---------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def child(*args: str, ready: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    process = await asyncio.create_subprocess_exec(
        sys.executable, *args, cwd=ROOT, env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    address = ""
    while not address:
        line = (await process.stdout.readline()).decode()
        if not line:
            raise RuntimeError(f"{args} exited before listening")
        if ready in line:
            address = line.strip().rsplit(" ", 1)[-1]
    try:
        yield address
    finally:
        process.terminate()
        await process.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def script(turns: int) -> pb.ScriptedModel:
    call = pb.ScriptedTurn(tool_calls=[pb.ScriptedToolCall(name="work", input_json="{}")])
    return pb.ScriptedModel(turns=[call] * turns + [pb.ScriptedTurn(text="done")])


def run_request(
    run_id: str, *, turns: int, tasks: int, checkpoint: bool = True
) -> pb.StartRunRequest:
    agent = pb.AgentSpec(name="a", provider="scripted", tools=["work"], scripted=script(turns))
    specs = [
        pb.TaskSpec(
            id=f"t{i}", title=f"T{i}", description="x", depends_on=[f"t{i - 1}"] if i else []
        )
        for i in range(tasks)
    ]
    return pb.StartRunRequest(
        run_id=run_id,
        request_id=run_id,
        team=pb.TeamSpec(name="bench", agents=[agent]),
        tasks=pb.TasksMode(tasks=specs),
        checkpoint=pb.CheckpointOptions(disabled=not checkpoint),
    )


async def finish(client: SidecarClient, run_id: str) -> list[pb.RunEvent]:
    return [event async for event in client.watch(run_id)]


# -- P9 --------------------------------------------------------------------------------------


async def p9(sidecar: SidecarClient, echo_address: str, n: int, repeats: int) -> dict[str, Any]:
    host = HostTools(
        sidecar,
        "p9",
        [HostTool(name="work", description="w", input_schema={"type": "object"}, handler=_ok)],
    )
    async with asyncio.TaskGroup() as group:
        serving = group.create_task(host.run())
        await host.registered.wait()
        await sidecar.start_run(run_request("p9-run", turns=1, tasks=2))
        await finish(sidecar, "p9-run")
        host.stop()
        serving.cancel()
    get = pb.GetRunRequest(run_id="p9-run")
    async with grpc.aio.insecure_channel(echo_address) as channel:
        echo = channel.unary_unary(ECHO_METHOD)
        payload = get.SerializeToString()

        async def one_echo() -> None:
            await echo(payload)

        async def one_get() -> None:
            await sidecar.runs.GetRun(get, metadata=sidecar.metadata)

        variants = {"echo": one_echo, "GetRun": one_get}
        medians: dict[str, list[float]] = {name: [] for name in variants}
        tails: dict[str, list[float]] = {name: [] for name in variants}
        for repeat in range(repeats):
            order = list(variants) if repeat % 2 == 0 else list(reversed(variants))
            for name in order:
                for _ in range(200):
                    await variants[name]()
                samples = []
                for _ in range(n):
                    started = time.perf_counter()
                    await variants[name]()
                    samples.append(time.perf_counter() - started)
                medians[name].append(percentile(samples, 0.5))
                tails[name].append(percentile(samples, 0.99))
    echo_p50 = statistics.median(medians["echo"])
    get_p50 = statistics.median(medians["GetRun"])
    return {
        "echo_p50_ms": echo_p50 * 1e3,
        "echo_p99_ms": statistics.median(tails["echo"]) * 1e3,
        "getrun_p50_ms": get_p50 * 1e3,
        "getrun_p99_ms": statistics.median(tails["GetRun"]) * 1e3,
        "ratio": get_p50 / echo_p50,
        "goal": 1.5,
    }


async def _ok(arguments: dict[str, Any], call: pb.ToolCall) -> str:
    return "ok"


# -- tool call round trip --------------------------------------------------------------------


async def tool_round_trip(
    client: SidecarClient, turns: int, *, checkpoint: bool, store_uri: str = ""
) -> dict[str, Any]:
    received: list[float] = []
    tool = HostTool(
        name="work", description="w", input_schema={"type": "object"}, handler=_stamp(received)
    )
    host = HostTools(client, f"rt-{uuid.uuid4().hex[:6]}", [tool])
    sent_at: dict[str, float] = {}
    acked_at: dict[str, float] = {}
    original = host._serve

    async def timed(call: pb.ToolCall, outgoing: asyncio.Queue[pb.ToolHostMessage | None]) -> None:
        await original(call, outgoing)  # puts the result on the outgoing queue
        sent_at[call.call_id] = time.perf_counter()

    host._serve = timed  # type: ignore[method-assign]
    host.ledger.acks = _StampedAcks(acked_at)
    run_id = f"rt-{uuid.uuid4().hex[:6]}"
    request = run_request(run_id, turns=turns, tasks=1, checkpoint=checkpoint)
    request.checkpoint.store_uri = store_uri
    async with asyncio.TaskGroup() as group:
        serving = group.create_task(host.run())
        await host.registered.wait()
        await client.start_run(request)
        await finish(client, run_id)
        await asyncio.sleep(0.05)
        host.stop()
        serving.cancel()
    acks = [acked_at[c] - sent_at[c] for c in sent_at if c in acked_at]
    cycles = [b - a for a, b in itertools.pairwise(received)]
    return {
        "calls": len(received),
        "result_to_ack_p50_ms": percentile(acks, 0.5) * 1e3 if acks else float("nan"),
        "call_to_next_call_p50_ms": percentile(cycles, 0.5) * 1e3,
    }


class _StampedAcks(dict[str, int]):
    """The ledger's ack table, noting when each ack arrived."""

    def __init__(self, stamps: dict[str, float]) -> None:
        super().__init__()
        self._stamps = stamps

    def __setitem__(self, key: str, value: int) -> None:
        self._stamps.setdefault(key, time.perf_counter())
        super().__setitem__(key, value)


def _stamp(received: list[float]):  # type: ignore[no-untyped-def]
    async def handler(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        received.append(time.perf_counter())
        return "ok"

    return handler


# -- watch throughput ------------------------------------------------------------------------


async def watch_rate(client: SidecarClient, tasks: int) -> dict[str, Any]:
    run_id = f"watch-{uuid.uuid4().hex[:6]}"
    request = run_request(run_id, turns=0, tasks=tasks, checkpoint=False)
    request.team.agents[0].ClearField("tools")
    await client.start_run(request)
    await finish(client, run_id)
    started = time.perf_counter()
    events = await finish(client, run_id)
    elapsed = time.perf_counter() - started
    return {"events": len(events), "events_per_s": len(events) / elapsed}


# -- P8 --------------------------------------------------------------------------------------


async def p8(client: SidecarClient, n: int) -> dict[str, Any]:
    gate = asyncio.Event()
    outstanding = 0
    peak = 0

    async def hold(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        nonlocal outstanding, peak
        outstanding += 1
        peak = max(peak, outstanding)
        if outstanding >= n:
            gate.set()
        try:
            await gate.wait()
        finally:
            outstanding -= 1
        return "ok"

    host = HostTools(
        client,
        f"p8-{n}",
        [HostTool(name="work", description="w", input_schema={"type": "object"}, handler=hold)],
        max_concurrent=10_000,
    )
    prefix = uuid.uuid4().hex[:6]
    async with asyncio.TaskGroup() as group:
        serving = group.create_task(host.run())
        await host.registered.wait()
        started = time.perf_counter()
        await asyncio.gather(
            *(client.start_run(run_request(f"p8-{prefix}-{i}", turns=1, tasks=2)) for i in range(n))
        )
        results = await asyncio.gather(*(finish(client, f"p8-{prefix}-{i}") for i in range(n)))
        elapsed = time.perf_counter() - started
        host.stop()
        serving.cancel()
    saves = sum(1 for events in results for event in events if event.type == "checkpoint_saved")
    completed = sum(
        1 for events in results if events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    )
    return {
        "runs": n,
        "completed": completed,
        "in_flight_peak": peak,
        "wall_s": elapsed,
        "saves": saves,
        "saves_per_s": saves / elapsed,
        "ms_per_save": elapsed / saves * 1e3,
    }


# -- main ------------------------------------------------------------------------------------


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    env = {"OMA_SIDECAR_TOKEN": TOKEN}
    results: dict[str, Any] = {}
    # The FileStore variant's runs live in --tmp: allow it as a store root (issue 12, item 6).
    serve = (
        "-m", "sidecar", "--listen", "127.0.0.1:0", "--store", "memory://",
        "--store-root", str(args.tmp),
    )  # fmt: skip
    async with (
        child(*serve, ready="listening on", env=env) as address,
        child(__file__, "--echo-server", ready="echo listening on") as echo_address,
        SidecarClient(address, TOKEN) as client,
    ):
        results["p9"] = await p9(client, echo_address, args.n, args.repeats)
        store = f"file://{Path(args.tmp) / f'bench-{uuid.uuid4().hex[:6]}.json'}"
        results["tool_call_memory"] = await tool_round_trip(client, args.turns, checkpoint=True)
        results["tool_call_file"] = await tool_round_trip(
            client, args.turns, checkpoint=True, store_uri=store
        )
        results["tool_call_no_checkpoint"] = await tool_round_trip(
            client, args.turns, checkpoint=False
        )
        results["watch"] = await watch_rate(client, args.watch_tasks)
        results["p8"] = [await p8(client, n) for n in args.p8]
    return results


def report(results: dict[str, Any]) -> None:
    p9r = results["p9"]
    print("| figure | value |")
    print("|---|---|")
    print(f"| P9 echo p50 / p99 | {p9r['echo_p50_ms']:.3f} / {p9r['echo_p99_ms']:.3f} ms |")
    print(f"| P9 GetRun p50 / p99 | {p9r['getrun_p50_ms']:.3f} / {p9r['getrun_p99_ms']:.3f} ms |")
    print(f"| P9 ratio GetRun/echo (goal <= 1.5x) | {p9r['ratio']:.2f}x |")
    for key, label in (
        ("tool_call_no_checkpoint", "no checkpoint"),
        ("tool_call_memory", "memory store"),
        ("tool_call_file", "FileStore"),
    ):
        r = results[key]
        print(f"| tool call, {label}: result->ack p50 | {r['result_to_ack_p50_ms']:.3f} ms |")
        print(
            f"| tool call, {label}: call->next call p50 | {r['call_to_next_call_p50_ms']:.3f} ms |"
        )
    w = results["watch"]
    print(f"| watch replay ({w['events']} events) | {w['events_per_s']:,.0f} events/s |")
    for r in results["p8"]:
        runs = f"P8 {r['runs']} runs"
        print(f"| {runs}: in flight peak / completed | {r['in_flight_peak']} / {r['completed']} |")
        timing = f"{r['wall_s']:.2f} s, {r['saves']}, {r['ms_per_save']:.3f} ms"
        print(f"| {runs}: wall, checkpoint saves, ms per save | {timing} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=2000, help="round trips per P9 sample")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--turns", type=int, default=200, help="tool calls in the round-trip run")
    parser.add_argument("--watch-tasks", type=int, default=1000)
    parser.add_argument(
        "--p8", type=lambda text: [int(x) for x in text.split(",")], default=[100, 1000]
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--tmp", default="/tmp", help="folder for the FileStore variant")
    args = parser.parse_args(argv)
    import uvloop

    if args.echo_server:
        uvloop.run(echo_server())
        return 0
    results = uvloop.run(bench(args))
    report(results)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

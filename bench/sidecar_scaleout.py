"""BENCH.md P10 (failover time) and P8 across three sidecars sharing one PostgreSQL.

Real ``python -m sidecar`` children started with identical flags (``--listen 127.0.0.1:0``, no
``--owner-id``: each process start is its own owner) on one fresh random table.

* **P10**: three sidecars (lease TTL ``--ttl``); ``--victims`` runs on sidecar A hold a host call
  (``stall``), then A gets ``kill -9``. Timed from just before the signal: the adopted run's
  redelivered call (resumed) and its next model call (its ``mark`` request reaching a host).
  Goal: next model call <= TTL + 1 s, and no committed effect delivered twice.
* **P8 x3**: ``sidecar.py``'s P8 (N runs in flight at once, each with an outstanding host call)
  spread over three sidecars vs all on one, same processes and table, interleaved; reports
  checkpoint saves per second and the ratio (three / one).
Without PostgreSQL it prints ``skipped`` and exits 0 (options: ``--help``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # no fork() notes from the children
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar._pb.oma.v1 import sidecar_pb2 as pb  # noqa: E402
from sidecar.cli import LISTEN_LINE  # noqa: E402
from sidecar.client import HostTool, HostTools, SidecarClient  # noqa: E402

TOKEN = "bench-" + uuid.uuid4().hex
DEFAULT_DSN = os.environ.get(
    "OMA_BENCH_POSTGRES_DSN",
    os.environ.get("OMA_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
)
DRAINS: set[asyncio.Task[None]] = set()
"""The stdout readers of the sidecars (kept referenced)."""
Handler = Callable[[dict[str, Any], pb.ToolCall], Awaitable[str]]


# -- processes and hosts ---------------------------------------------------------------------


async def start_sidecar(store: str, ttl: float) -> tuple[Any, str]:
    """``python -m sidecar`` on a free port sharing ``store``; (process, address) once listening.

    Every sidecar gets the same flags, the way identical pods are deployed.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sidecar", "--listen", "127.0.0.1:0", "--store", store,
        "--lease-ttl", str(ttl), "--heartbeat", "0.5",
        cwd=ROOT, env={**os.environ, "OMA_SIDECAR_TOKEN": TOKEN},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(60):
            while True:
                line = (await process.stdout.readline()).decode()
                if not line:
                    raise RuntimeError("a sidecar exited before listening")
                if line.startswith(LISTEN_LINE):
                    address = line.removeprefix(LISTEN_LINE).strip()
                    break
    except BaseException:
        process.kill()
        await process.wait()
        raise
    # Keep draining its stdout so a chatty sidecar never blocks on a full pipe.
    DRAINS.add(asyncio.get_running_loop().create_task(_drain(process.stdout)))
    return process, address


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


@contextlib.asynccontextmanager
async def cluster(
    store: str, ttl: float, tools: list[HostTool], tag: str
) -> AsyncIterator[tuple[list[Any], list[SidecarClient], list[HostTools]]]:
    """Three sidecars on ``store`` with one host each; every process killed (-9) on exit."""
    started = await asyncio.gather(
        *(start_sidecar(store, ttl) for _ in range(3)), return_exceptions=True
    )
    processes = [item[0] for item in started if not isinstance(item, BaseException)]
    async with contextlib.AsyncExitStack() as stack:

        async def reap() -> None:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                await process.wait()

        stack.push_async_callback(reap)
        for item in started:
            if isinstance(item, BaseException):
                raise item
        clients = [
            await stack.enter_async_context(SidecarClient(address, TOKEN)) for _, address in started
        ]
        hosts = [
            HostTools(client, f"{tag}-host-{i}", tools, max_concurrent=10_000)
            for i, client in enumerate(clients)
        ]
        group = await stack.enter_async_context(asyncio.TaskGroup())
        for client, host in zip(clients, hosts, strict=True):
            await client.ready()
            task = group.create_task(host.run(reconnect_delay=0.05))
            stack.callback(task.cancel)
            stack.callback(host.stop)
        for host in hosts:
            await asyncio.wait_for(host.registered.wait(), 30)
        yield processes, clients, hosts


def tool(name: str, handler: Handler) -> HostTool:
    """A host tool ``name`` taking any object."""
    return HostTool(name=name, description=name, input_schema={"type": "object"}, handler=handler)


def call(name: str) -> pb.ScriptedTurn:
    """A scripted turn calling the tool ``name``."""
    return pb.ScriptedTurn(tool_calls=[pb.ScriptedToolCall(name=name, input_json="{}")])


def run_request(run_id: str, turns: list[pb.ScriptedTurn], tools: list[str], tasks: int):  # type: ignore[no-untyped-def]
    """``tasks`` chained tasks for one scripted agent playing ``turns`` (a final text added)."""
    script = pb.ScriptedModel(turns=[*turns, pb.ScriptedTurn(text="done")])
    agent = pb.AgentSpec(name="a", provider="scripted", tools=tools, scripted=script)
    specs = [
        pb.TaskSpec(
            id=f"t{i}", title=f"T{i}", description="x", depends_on=[f"t{i - 1}"] if i else []
        )
        for i in range(tasks)
    ]
    return pb.StartRunRequest(
        run_id=run_id, request_id=run_id, team=pb.TeamSpec(name="bench", agents=[agent]),
        tasks=pb.TasksMode(tasks=specs),
    )  # fmt: skip


async def finish(client: SidecarClient, run_id: str) -> list[pb.RunEvent]:
    """Every event of ``run_id`` until it ends."""
    return [event async for event in client.watch(run_id, allow_gap=True)]


# -- P10 -------------------------------------------------------------------------------------


async def p10_repeat(store: str, ttl: float, victims: int, index: int) -> dict[str, Any]:
    """One repeat: start three sidecars, stall ``victims`` runs on A, kill A, time the takeover."""
    killed = asyncio.Event()
    release = asyncio.Event()  # ends the attempt-1 stalls at cleanup
    stalled: set[str] = set()
    all_stalled = asyncio.Event()
    resumed: dict[str, float] = {}
    modelled: dict[str, float] = {}
    duplicates: list[str] = []
    hosts: list[HostTools] = []

    def check(call: pb.ToolCall) -> None:
        if any(call.idempotency_key in host.ledger.committed_keys() for host in hosts):
            duplicates.append(call.idempotency_key)

    async def stall(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        check(call)
        if killed.is_set():
            resumed.setdefault(call.run_id, time.perf_counter())
            return "ok"
        stalled.add(call.run_id)
        if len(stalled) == victims:
            all_stalled.set()
        await release.wait()
        return "late"

    async def mark(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        check(call)
        if call.run_attempt >= 2:
            modelled.setdefault(call.run_id, time.perf_counter())
        return "ok"

    tools = [tool("stall", stall), tool("mark", mark)]
    prefix = f"p10-{index}-{uuid.uuid4().hex[:6]}"
    run_ids = [f"{prefix}-{i}" for i in range(victims)]
    async with cluster(store, ttl, tools, f"p10r{index}") as (processes, clients, hosted):
        hosts.extend(hosted)
        try:
            for run_id in run_ids:
                request = run_request(run_id, [call("stall"), call("mark")], ["stall", "mark"], 1)
                await clients[0].start_run(request)
            await asyncio.wait_for(all_stalled.wait(), 30)
            await asyncio.sleep(0.2)  # the calls' dispatch is logged; leases freshly renewed
            killed_at = time.perf_counter()
            processes[0].send_signal(signal.SIGKILL)
            await processes[0].wait()
            killed.set()
            results = await asyncio.wait_for(
                asyncio.gather(*(finish(clients[1], run_id) for run_id in run_ids)), 60
            )
            runs = [await clients[2].get_run(run_id) for run_id in run_ids]
        finally:
            release.set()
    completed = sum(1 for e in results if e[-1].run_status.status == pb.RUN_STATUS_COMPLETED)
    to_resume = [resumed[r] - killed_at for r in run_ids if r in resumed]
    to_model = [modelled[r] - killed_at for r in run_ids if r in modelled]
    return {
        "victims": victims, "completed": completed, "attempts": sorted({r.attempt for r in runs}),
        "resume_s": to_resume, "model_call_s": to_model, "duplicates": len(duplicates),
    }  # fmt: skip


async def p10(store: str, ttl: float, victims: int, repeats: int) -> dict[str, Any]:
    rows = []
    for index in range(repeats):
        row = await p10_repeat(store, ttl, victims, index)
        print(f"# P10 repeat {index + 1}: {json.dumps(row, default=str)}", flush=True)
        rows.append(row)
    firsts = [min(row["model_call_s"]) for row in rows if row["model_call_s"]]
    lasts = [max(row["model_call_s"]) for row in rows if row["model_call_s"]]
    resumes = [min(row["resume_s"]) for row in rows if row["resume_s"]]
    return {
        "ttl_s": ttl,
        "goal_s": ttl + 1.0,
        "repeats": rows,
        "median_resume_s": statistics.median(resumes) if resumes else None,
        "median_first_model_call_s": statistics.median(firsts) if firsts else None,
        "median_last_model_call_s": statistics.median(lasts) if lasts else None,
    }


# -- P8 across three sidecars ----------------------------------------------------------------


async def p8_variant(
    clients: list[SidecarClient], gate: dict[str, Any], n: int, spread: int
) -> dict[str, Any]:
    """N runs, round-robin over the first ``spread`` clients; held until all N are in flight."""
    gate.update(event=asyncio.Event(), n=n, outstanding=0, peak=0)
    prefix = f"p8-{spread}-{uuid.uuid4().hex[:6]}"
    targets = [(f"{prefix}-{i}", clients[i % spread]) for i in range(n)]
    started = time.perf_counter()
    await asyncio.gather(
        *(
            client.start_run(run_request(run_id, [call("work")], ["work"], 2))
            for run_id, client in targets
        )
    )
    results = await asyncio.gather(*(finish(client, run_id) for run_id, client in targets))
    elapsed = time.perf_counter() - started
    saves = sum(1 for events in results for e in events if e.type == "checkpoint_saved")
    completed = sum(1 for e in results if e[-1].run_status.status == pb.RUN_STATUS_COMPLETED)
    return {
        "sidecars": spread, "runs": n, "completed": completed, "in_flight_peak": gate["peak"],
        "wall_s": elapsed, "saves": saves, "saves_per_s": saves / elapsed,
    }  # fmt: skip


async def p8(store: str, ttl: float, n: int, repeats: int) -> dict[str, Any]:
    gate: dict[str, Any] = {}

    async def hold(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        gate["outstanding"] += 1
        gate["peak"] = max(gate["peak"], gate["outstanding"])
        if gate["outstanding"] >= gate["n"]:
            gate["event"].set()
        try:
            await gate["event"].wait()
        finally:
            gate["outstanding"] -= 1
        return "ok"

    rows: dict[int, list[dict[str, Any]]] = {1: [], 3: []}
    async with cluster(store, ttl, [tool("work", hold)], "p8") as (_, clients, _hosts):
        for index in range(repeats):
            for spread in (1, 3) if index % 2 == 0 else (3, 1):
                row = await asyncio.wait_for(p8_variant(clients, gate, n, spread), 600)
                print(f"# P8 repeat {index + 1}: {json.dumps(row)}", flush=True)
                rows[spread].append(row)
    one = statistics.median(row["saves_per_s"] for row in rows[1])
    three = statistics.median(row["saves_per_s"] for row in rows[3])
    return {
        "lease_ttl_s": ttl, "runs": n, "one": rows[1], "three": rows[3],
        "median_saves_per_s_one": one, "median_saves_per_s_three": three,
        "ratio_three_over_one": three / one,
    }  # fmt: skip


# -- main ------------------------------------------------------------------------------------


async def probe(dsn: str) -> str | None:
    """None when PostgreSQL at ``dsn`` answers, else why not."""
    try:
        connection = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        return f"PostgreSQL cannot be used ({type(exc).__name__}: {exc})"
    await connection.close()
    return None


async def bench(args: argparse.Namespace) -> dict[str, Any] | None:
    why = await probe(args.dsn)
    if why is not None:
        print(f"# sidecar_scaleout (P8 x3, P10): skipped, {why}")
        return None
    table = f"oma_bench_scale_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in args.dsn else "?"
    store = f"{args.dsn}{separator}table={table}"
    results: dict[str, Any] = {"table": table}
    try:
        results["p10"] = await p10(store, args.ttl, args.victims, args.repeats)
        if args.p8:
            results["p8"] = await p8(store, args.p8_ttl, args.p8, args.repeats)
    finally:
        connection = await asyncpg.connect(args.dsn)
        try:
            await connection.execute(f'DROP TABLE IF EXISTS "{table}"')
        finally:
            await connection.close()
    return results


def report(results: dict[str, Any]) -> None:
    r = results["p10"]
    ms = lambda value: "-" if value is None else f"{value * 1e3:.0f} ms"  # noqa: E731
    first, goal = r["median_first_model_call_s"], r["goal_s"]
    verdict = "PASS" if first is not None and first <= goal else "MISS"
    dups = sum(row["duplicates"] for row in r["repeats"])
    print("| figure | value |")
    print("|---|---|")
    print(f"| P10 lease TTL / goal | {r['ttl_s']:g} s / <= {goal:g} s |")
    for i, row in enumerate(r["repeats"], 1):
        times = ", ".join(f"{t * 1e3:.0f}" for t in sorted(row["model_call_s"]))
        done = f"{row['completed']}/{row['victims']} completed, attempts {row['attempts']}"
        print(f"| P10 repeat {i}: kill -> next model call per run (ms) | {times} ({done}) |")
    print(f"| P10 median kill -> run resumed (redelivered call) | {ms(r['median_resume_s'])} |")
    print(f"| P10 median kill -> first adopted model call | {ms(first)} ({verdict}) |")
    print(f"| P10 median kill -> last adopted model call | {ms(r['median_last_model_call_s'])} |")
    print(f"| P10 committed effects delivered twice | {dups} |")
    if "p8" in results:
        p = results["p8"]
        for key, label in (("one", "1 sidecar"), ("three", "3 sidecars")):
            for row in p[key]:
                line = (
                    f"{row['wall_s']:.2f} s, peak {row['in_flight_peak']}, "
                    f"{row['completed']}/{row['runs']} completed, {row['saves']} saves, "
                    f"{row['saves_per_s']:,.0f} saves/s"
                )
                print(f"| P8 {p['runs']} runs, {label} | {line} |")
        print(
            f"| P8 median saves/s, 1 vs 3 sidecars | {p['median_saves_per_s_one']:,.0f} vs "
            f"{p['median_saves_per_s_three']:,.0f} = {p['ratio_three_over_one']:.2f}x |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repeat, small N")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--victims", type=int, default=4, help="runs stalled on the killed one")
    parser.add_argument("--ttl", type=float, default=2.0, help="P10 lease TTL, seconds")
    parser.add_argument("--p8", type=int, default=300, help="P8 runs in flight (0: skip P8)")
    parser.add_argument("--p8-ttl", type=float, default=10.0, help="P8 lease TTL (the default)")
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.victims, args.p8 = 1, 2, min(args.p8, 30)
    import uvloop

    results = uvloop.run(bench(args))
    if results is None:
        return 0
    report(results)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

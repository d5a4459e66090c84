"""Issue 20's outage goal: after a store outage of 3x the lease TTL, every run completes within
TTL + 5 s of the store's return (and none ends CANCELLED or FAILED).

One in-process sidecar on PostgreSQL through a TCP proxy (``tests/sidecar/tcp_proxy.py``);
``--runs`` runs each hold a host call (``lookup`` of their t2); the proxy is cut, the calls are
answered during the outage (``--answered during``: the attempts' saves fail) or after it
(``after``: the attempts lose their leases), the proxy is mended after ``3 x --ttl`` seconds,
and the time from the mend to each run's completion is reported. Without PostgreSQL it prints
``skipped``.

Run: ``.venv/bin/python bench/sidecar_outage.py [--runs 10] [--ttl 2] [--answered during]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "sidecar"))

from sidecar_helpers import TOKEN, lookup_tool, run_request  # noqa: E402
from tcp_proxy import CuttableProxy  # noqa: E402

from sidecar._pb.oma.v1 import sidecar_pb2 as pb  # noqa: E402
from sidecar.client import HostTools, SidecarClient  # noqa: E402
from sidecar.server import ServerConfig, Sidecar  # noqa: E402

DSN = os.environ.get("OMA_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
ENDED = {pb.RUN_STATUS_COMPLETED, pb.RUN_STATUS_CANCELLED, pb.RUN_STATUS_FAILED}


async def ended(client: SidecarClient, run_id: str) -> tuple[float, int, list[int]]:
    """Poll until the run ends: (when, its status, the statuses seen)."""
    seen: list[int] = []
    while True:
        try:
            run = await client.get_run(run_id)
        except Exception:  # the store is away: GetRun fails meanwhile
            await asyncio.sleep(0.05)
            continue
        if not seen or seen[-1] != run.status:
            seen.append(run.status)
        if run.status in ENDED:
            return time.perf_counter(), run.status, seen
        await asyncio.sleep(0.05)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    import asyncpg

    parts = urlsplit(DSN)
    table = f"oma_bench_outage_{uuid.uuid4().hex[:12]}"
    held: set[str] = set()
    all_held, release = asyncio.Event(), asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if call.task_id == "t2" and not release.is_set():
            held.add(call.run_id)
            if len(held) == args.runs:
                all_held.set()
            await release.wait()
        return "ok"

    try:
        async with CuttableProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as proxy:
            user = f"{parts.username}@" if parts.username else ""
            store = f"postgresql://{user}127.0.0.1:{proxy.port}{parts.path}?table={table}"
            config = ServerConfig(
                token=TOKEN, listen="127.0.0.1:0", store_uri=store, heartbeat_s=0.5,
                grace_s=0.1, lease_ttl_s=args.ttl,
            )  # fmt: skip
            async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
                host = HostTools(client, "outage-host", [lookup_tool(lookup)])
                serving = asyncio.create_task(host.run(reconnect_delay=0.05))
                await asyncio.wait_for(host.registered.wait(), 10)
                run_ids = [f"out-{i}" for i in range(args.runs)]
                for run_id in run_ids:
                    await client.start_run(run_request(run_id, task_ids=("t1", "t2", "t3")))
                await asyncio.wait_for(all_held.wait(), 60)
                proxy.cut()
                await asyncio.sleep(0.2)
                if args.answered == "during":
                    release.set()
                await asyncio.sleep(3 * args.ttl)
                proxy.mend()
                mended = time.perf_counter()
                release.set()
                results = await asyncio.wait_for(
                    asyncio.gather(*(ended(client, r) for r in run_ids)), 120
                )
                runs = [await client.get_run(r) for r in run_ids]
                host.stop()
                serving.cancel()
    finally:
        connection = await asyncpg.connect(DSN)
        try:
            for name in (table, f"{table}_journal"):
                await connection.execute(f'DROP TABLE IF EXISTS "{name}"')
        finally:
            await connection.close()
    after = [when - mended for when, _, _ in results]
    return {
        "settings": vars(args),
        "goal_s": args.ttl + 5,
        "completed": sum(1 for _, status, _ in results if status == pb.RUN_STATUS_COMPLETED),
        "cancelled_or_failed": sum(1 for _, s, _ in results if s != pb.RUN_STATUS_COMPLETED),
        "attempts": sorted({run.attempt for run in runs}),
        "after_return_s": {"median": statistics.median(after), "max": max(after)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--ttl", type=float, default=2.0)
    parser.add_argument("--answered", choices=("during", "after"), default="during")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)  # the outage logs a lot, by design
    try:
        import asyncpg

        async def probe() -> None:
            await (await asyncpg.connect(DSN, timeout=5)).close()

        asyncio.run(probe())
    except Exception as exc:
        print(f"skipped: PostgreSQL unavailable ({exc})")
        return
    result = asyncio.run(bench(args))
    print(json.dumps(result, indent=2, default=str))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()

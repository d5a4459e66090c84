"""BENCH.md P11: a long-lived sidecar stays flat over waves of finished runs (retention).

One in-process sidecar (``--retain-runs``) runs waves of short runs (a scripted agent calling
the Python tool ``echo`` once per task, ``--concurrency`` at a time) and, after each wave, reports
the time per run, the process RSS, the state store's key count and the registry's cache size.
The same waves run once with retention and once without, interleaved wave by wave in two
sidecars, so the figures compare like with like (``--only retained`` for an RSS of one sidecar:
both share this process). P11's goal: the last wave's time per run
<= 1.2x the first's with retention.

Run: ``.venv/bin/python bench/sidecar_retention.py [--waves 6] [--per-wave 300]
[--retain 100] [--store memory://] [--json PATH]``; ``--store file://`` gives each sidecar a
fresh state file of its own (P11 on the file store, the default kind of ``oma serve``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "sidecar"))

from sidecar_helpers import ECHO, TOKEN, run_request  # noqa: E402

from sidecar.client import SidecarClient  # noqa: E402
from sidecar.server import ServerConfig, Sidecar  # noqa: E402


def rss_mb() -> float:
    """The resident set size of this process now, in MB."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def journal_files(server: Sidecar) -> int:
    """How many run journal files the sidecar's file store keeps beside it (0: none)."""
    uri = server.config.store_uri
    if not uri.startswith("file://"):
        return 0
    folder = Path(uri.removeprefix("file://") + ".journals")
    return len(list(folder.iterdir())) if folder.is_dir() else 0


async def one_run(client: SidecarClient, run_id: str) -> None:
    request = run_request(run_id, tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    await client.start_run(request)
    async for _ in client.watch(run_id):
        pass


async def wave(client: SidecarClient, prefix: str, count: int, concurrency: int) -> float:
    """Run ``count`` runs; seconds per run."""
    gate = asyncio.Semaphore(concurrency)

    async def gated(index: int) -> None:
        async with gate:
            await one_run(client, f"{prefix}-{index}")

    started = time.perf_counter()
    await asyncio.gather(*(gated(index) for index in range(count)))
    return (time.perf_counter() - started) / count


def store_of(store: str, name: str, scratch: Path) -> str:
    """``store`` for the sidecar ``name``: a file store gets a file of its own in ``scratch``
    (two sidecars cannot hold one state file); ``file://`` alone means a fresh one."""
    if store.startswith("file://"):
        return f"file://{scratch / name / 'state.json'}"
    return store


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="oma-p11-") as scratch:
        return await measure(args, Path(scratch))


async def measure(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    configs = {
        "retained": ServerConfig(
            token=TOKEN,
            listen="127.0.0.1:0",
            store_uri=store_of(args.store, "retained", scratch),
            python_tools={"echo": ECHO},
            retain_runs=args.retain,
            retention_interval_s=0.5,
        ),
        "unbounded": ServerConfig(
            token=TOKEN,
            listen="127.0.0.1:0",
            store_uri=store_of(args.store, "unbounded", scratch),
            python_tools={"echo": ECHO},
        ),
    }
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    async with (
        Sidecar(configs["retained"]) as retained,
        Sidecar(configs["unbounded"]) as unbounded,
        SidecarClient(retained.address, TOKEN) as retained_client,
        SidecarClient(unbounded.address, TOKEN) as unbounded_client,
    ):
        pairs = {
            "retained": (retained, retained_client),
            "unbounded": (unbounded, unbounded_client),
        }
        for index in range(args.waves):
            for name, (server, client) in pairs.items():
                if args.only and name != args.only:
                    continue
                per_run = await wave(client, f"w{index}", args.per_wave, args.concurrency)
                await asyncio.sleep(1.0)  # let a retention sweep pass
                assert server.state is not None
                assert server.registry is not None
                rows[name].append(
                    {
                        "finished_runs": (index + 1) * args.per_wave,
                        "ms_per_run": per_run * 1000,
                        "store_keys": len(await server.state.list()),
                        "journal_files": journal_files(server),
                        "cached_runs": len(server.registry.cached()),
                        "rss_mb": rss_mb(),  # both sidecars share this process
                    }
                )
                print(name, rows[name][-1], flush=True)
    return {"settings": vars(args), "waves": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--waves", type=int, default=6)
    parser.add_argument("--per-wave", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--retain", type=int, default=100)
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--only", choices=("retained", "unbounded"), help="one sidecar's waves")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = asyncio.run(bench(args))
    waves = result["waves"][args.only or "retained"]
    ratio = waves[-1]["ms_per_run"] / waves[0]["ms_per_run"]
    name = args.only or "retained"
    print(f"P11 {name}: last wave / first wave time per run = {ratio:.2f}x (goal <= 1.2x)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()

"""P13 through the runtime: durable boundaries/s of 1,000 whole runs at once on one JSONL journal.

``journal_p13.py`` times the journal alone (a recorder appending drafts). This times what a
user's process does: ``--runs`` calls of ``OpenMultiAgent.run_tasks`` at once, each a one-task
run whose scripted model asks for ``--turns`` tool calls (one ``--payload``-byte result each) and
then answers, journal-first (D10) on ONE shared ``JsonlRunJournal`` (flush window 0: the runs'
appends of a loop turn share a batch and its fsync) with a ``FileStore`` of its own per run. Every
boundary is counted from the runs' ``CheckpointSaved`` events (``journal``: its events made
durable; ``snapshot``: a compaction, the runs' admission and end among them). The same runs
without any checkpoint (``none``) are timed too, interleaved repeat by repeat, so the table
splits each boundary's CPU into the runtime's own (agent loop, actors, scripted model, tools)
and what checkpointing adds. CPU is the process's (``time.process_time``: the journal's
thread included); ``1 / CPU`` is how many boundaries/s one core could carry.

``--gc-threshold N`` runs with ``gc.set_threshold(N, 20, 100)`` instead of CPython's default
(700, 10, 10): with 1,000 runs' conversations in memory, the collector's passes over them are a
share of every boundary's CPU that a long-lived process can tune away (measured: the table with
and without). The default run keeps the interpreter's default, as a user's process would.

Run: ``.venv/bin/python bench/runs_p13.py [--runs 1000] [--turns 10] [--repeats 3] [--profile]
[--gc-threshold 50000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import pstats
import shutil
import tempfile
import time
from typing import Any

from checkpoint_report import fmt_ratio, median, rotated, table, verdict
from checkpoint_workload import bench_agent, bench_task

from oma_actors import CheckpointOptions, OpenMultiAgent, Team
from oma_actors.actors import event_loop_factory
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.stores import FileStore

GOAL = 20_000.0
VARIANTS = ("journal", "none")


async def one(
    variant: str, a: argparse.Namespace, workdir: str, profile: cProfile.Profile | None = None
) -> dict[str, Any]:
    """``a.runs`` runs at once; boundaries counted by kind, wall and CPU seconds."""
    saves: dict[str, int] = {}

    def count(event: ProgressEvent) -> None:
        if isinstance(event, CheckpointSaved):
            saves[event.mode] = saves.get(event.mode, 0) + 1

    oma = OpenMultiAgent(on_progress=count)
    root = tempfile.mkdtemp(dir=workdir)
    checkpointed = variant == "journal"
    journal = JsonlRunJournal(os.path.join(root, "runs.jsonl"), flush_interval_ms=0)
    stores = [FileStore(os.path.join(root, f"run-{i}.json")) for i in range(a.runs * checkpointed)]

    async def run(i: int) -> bool:
        team = Team("p13", [bench_agent(a.turns, a.payload, None)])
        if not checkpointed:
            return (await oma.run_tasks(team, [bench_task()])).success
        result = await oma.run_tasks(
            team,
            [bench_task()],
            checkpoint=CheckpointOptions(store=stores[i], run_id=f"run-{i}"),
            journal=JournalOptions(journal),
        )
        return result.success

    try:
        if profile is not None:
            profile.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        done = await asyncio.gather(*(run(i) for i in range(a.runs)))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        if profile is not None:
            profile.disable()
    finally:
        await journal.close()  # never opened without a checkpoint: nothing to write
        for store in stores:
            await store.aclose()
        shutil.rmtree(root, ignore_errors=True)
    if not all(done):
        raise RuntimeError(f"{done.count(False)} of {a.runs} {variant} runs failed")
    return {"seconds": seconds, "cpu": cpu, "saves": saves}


async def measure(a: argparse.Namespace, workdir: str) -> dict[str, list[dict[str, Any]]]:
    """Both variants, ``a.repeats`` times, rotated."""
    found: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for rep in range(a.repeats):
        for variant in rotated(VARIANTS, rep):
            found[variant].append(await one(variant, a, workdir))
    return found


def report(a: argparse.Namespace, found: dict[str, list[dict[str, Any]]]) -> None:
    """Print the P13 table: throughput, CPU per boundary, and its split."""
    runs = found["journal"]
    saves = runs[0]["saves"]
    journal_saves = saves.get("journal", 0)
    durable = journal_saves + saves.get("snapshot", 0)
    rate = median([durable / r["seconds"] for r in runs])
    cpu = median([r["cpu"] / durable for r in runs])
    # Without a checkpoint nothing is saved: the same runs reach the same boundaries.
    plain = median([r["cpu"] / durable for r in found["none"]])
    rows = [
        [
            f"{a.runs} runs x {a.turns} tool turns",
            f"{durable:,} ({journal_saves:,} journal, {saves.get('snapshot', 0):,} snapshot)",
            f"{rate:,.0f}/s",
            f"{fmt_ratio(rate / GOAL)} {verdict(rate, GOAL, at_most=False)}",
            f"{cpu * 1e6:.0f} us",
            f"{plain * 1e6:.0f} us",
            f"{(cpu - plain) * 1e6:.0f} us",
            f"{1 / cpu:,.0f}/s ({fmt_ratio(1 / cpu / GOAL)} of goal)",
        ]
    ]
    collector = "default" if a.gc_threshold is None else f"threshold {a.gc_threshold}"
    print(
        f"\n## P13 through the runtime, one shared JSONL journal, median of {a.repeats}, "
        f"collector {collector}\n"
    )
    headers = [
        "workload",
        "durable boundaries",
        "boundaries/s (wall)",
        "wall x goal",
        "CPU / boundary",
        "of which the runtime (no checkpoint)",
        "checkpointing adds",
        "1 / CPU",
    ]
    print(table(headers, rows))


def main() -> None:
    """Parse the command line, measure, print the table (and a profile)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--payload", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="then cProfile one journal pass")
    ap.add_argument("--gc-threshold", type=int, help="gc.set_threshold(N, 20, 100) first")
    a = ap.parse_args()
    if a.gc_threshold is not None:
        gc.set_threshold(a.gc_threshold, 20, 100)
    print(f"# P13 runs_p13.py  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print(f"# runs={a.runs} turns={a.turns} payload={a.payload} B")
    with (
        tempfile.TemporaryDirectory(prefix="oma-p13-runs-") as workdir,
        asyncio.Runner(loop_factory=event_loop_factory()) as runner,
    ):
        found = runner.run(measure(a, workdir))
        report(a, found)
        if a.profile:
            profile = cProfile.Profile()
            runner.run(one("journal", a, workdir, profile))
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
            print(f"\n## cProfile, journal (top by own time)\n\n```\n{text.getvalue()}\n```")


if __name__ == "__main__":
    main()

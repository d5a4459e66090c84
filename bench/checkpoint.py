"""BENCH.md P1-P6: what checkpointing costs, side by side with its floor and with LangGraph.

Four configurations, measured side by side in one run (issue 9, item 7):

* **FileStore alone** (OMA mode): a ``FileStore`` checkpoint, the whole snapshot per boundary.
* **FileStore + durable journal**: the same store plus ``JsonlRunJournal(flush_interval_ms=0)``
  in ``JournalOptions(durable=True)``: per-turn boundaries are journal appends, the snapshot a
  compaction point (D10).
* **LangGraph SqliteSaver**: the anchor graph of ``shared/bench/langgraph_bench.py``
  (``operator.add`` message list), ``durability="sync"``.
* **LangGraph DeltaChannel**: the same graph with the list as a ``DeltaChannel``.

The floor is what the durability promise needs: an append of the bytes that changed at a
boundary (the durable journal's own bytes) + ``fdatasync``, on the same disk, interleaved save
by save (P1) or run by run as a run of its own (P2-P4). A ratio below 1.0 against a floor is a
bench bug, printed as such. Every figure is a ratio of things measured in the same run; repeats
are interleaved and tables report medians. Differences under 1.3x are noise on these machines.

* P1 time added per boundary at small state (the real save path of a running run), vs the floor.
* P2 time added per turn at 300 and 1000 turns, vs the floor per turn and vs LangGraph's two steps.
* P3 logical (``wchar``) and disk (``write_bytes``) bytes over 1000 turns, and their growth.
* P4 per-turn drift, last decile / first decile, over 1000 turns.
* P5 restore of the 1000-turn run in a fresh process, after import, to the first model call.
* P6 ``import oma_actors``.

Run: ``.venv/bin/python bench/checkpoint.py [--quick] [--json PATH] [--only P1,P3] [--profile]``.
This file is the entry point (command line, header, order of the figures); each figure lives in
its own module (``checkpoint_p1.py`` .. ``checkpoint_p6.py``), beside the workload, the floor and
its probe, the journal configuration, the LangGraph anchor and DeltaChannel, the interleaved runs,
the report helpers, the summary table and the P5 children.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import checkpoint_p1
import checkpoint_p2
import checkpoint_p3
import checkpoint_p4
import checkpoint_p5
import checkpoint_p6
import checkpoint_summary
from checkpoint_delta import delta_available
from checkpoint_journal import durable_available, profile
from checkpoint_langgraph import langgraph_versions
from checkpoint_report import KIB, NOISE, median
from checkpoint_settings import Bench, settings

import oma_actors
from oma_actors.actors import event_loop_factory


def loadavg() -> str:
    """The load averages of the machine, or ``n/a``."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def noise_probe(reps: int = 30) -> dict[str, float]:
    """The anchor's fixed pure-Python loop; its CV shows how noisy the machine is right now."""
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        x = 0
        for i in range(200_000):
            x += i
        ts.append(time.perf_counter() - t0)
    return {
        "median_ms": median(ts) * 1e3,
        "cv": statistics.pstdev(ts) / statistics.fmean(ts),
    }


def git_revision() -> str:
    """The short revision of this checkout, noting uncommitted changes under ``oma_actors/``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        rev = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "oma_actors"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + (" (oma_actors/ has uncommitted changes)" if dirty else "")


def header(bench: Bench, lg: dict[str, str] | None) -> None:
    """Print the run's header (machine, revision, settings, noise) and store it under ``meta``."""
    s = bench.s
    probe = noise_probe()
    fs = subprocess.run(
        ["stat", "-f", "-c", "%T", s.workdir], capture_output=True, text=True, check=False
    ).stdout.strip()
    loop = type(bench.runner.get_loop()).__module__.split(".")[0]
    lines = [
        "# oma-actors checkpoint benchmark (BENCH.md P1-P6, four configurations)",
        f"# date      {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"# python    {sys.version.split()[0]} on {platform.platform()}, event loop: {loop}",
        f"# cpus      {os.cpu_count()}  loadavg(before) {loadavg()}",
        f"# revision  {git_revision()}; oma_actors from {os.path.dirname(oma_actors.__file__)}",
        f"# langgraph {lg if lg else 'LangGraph columns skipped: ' + s.lg_skipped}"
        + ("" if not lg or s.delta else " (no DeltaChannel in this version: its column skipped)"),
        "# journal   JsonlRunJournal(flush_interval_ms=0), JournalOptions(durable="
        + ("True)" if bench.shared.durable else "False): journal-first (D10) NOT available here"),
        f"# workdir   {s.workdir} (fs: {fs or 'unknown'})",
        f"# settings  {'--quick ' if s.quick else ''}repeats={s.repeats} payload={s.payload}B"
        f" P1 turns={s.p1_turns} x{s.p1_repeats} P2 turns={s.p2_turns}"
        f" P2/P3/P4/P5 turns={s.long_turns}",
        f"# noise     fixed loop median {probe['median_ms']:.2f} ms,"
        f" CV {probe['cv'] * 100:.1f}% (differences under {NOISE}x are noise)",
    ]
    print("\n".join(lines), flush=True)
    bench.results["meta"] = {
        "settings": {k: getattr(s, k) for k in s.__slots__},
        "langgraph": lg,
        "durable": bench.shared.durable,
        "noise": probe,
        "revision": git_revision(),
        "loop": loop,
    }


def main() -> None:
    """Parse the command line, run the figures asked for and print their tables."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run under 60 s")
    ap.add_argument("--json", default=None, help="also write every result as JSON here")
    ap.add_argument("--only", default="P1,P2,P3,P4,P5,P6", help="comma list of goals to run")
    ap.add_argument("--repeats", type=int, default=0, help="interleaved repeats [3]")
    ap.add_argument("--payload", type=int, default=KIB, help="bytes appended per turn [1024]")
    ap.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph anchor")
    ap.add_argument("--workdir", default=None, help="a directory on the disk under test")
    ap.add_argument(
        "--profile", action="store_true", help="also cProfile the journal configuration's run"
    )
    a = ap.parse_args()
    lg = None if a.no_langgraph else langgraph_versions()
    workdir = a.workdir or tempfile.mkdtemp(prefix="oma-cpbench-")
    os.makedirs(workdir, exist_ok=True)
    s = settings(a, workdir, lg is not None, lg is not None and delta_available())
    if a.no_langgraph:
        s.lg_skipped = "--no-langgraph"
    only = {x.strip().upper() for x in a.only.split(",") if x.strip()}
    started = time.perf_counter()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            bench = Bench(s, runner)
            bench.shared.durable = durable_available()
            header(bench, lg)
            if "P1" in only:
                checkpoint_p1.run(bench)
            elif only & {"P2", "P3", "P4"}:
                checkpoint_p1.calibrate(bench)  # the floor's bytes
            if "P2" in only:
                checkpoint_p2.run(bench)
            if only & {"P2", "P3", "P4"}:
                runs = checkpoint_p3.long_runs(bench)
                if "P2" in only:
                    checkpoint_p2.report(bench, runs, s.long_turns)
                checkpoint_p3.run(bench, runs)
                checkpoint_p4.run(bench, runs)
                del runs
            if "P5" in only:
                checkpoint_p5.run(bench)
            if "P6" in only:
                checkpoint_p6.run(bench)
            checkpoint_summary.run(bench)
            if a.profile:
                profile(bench, s.p2_turns)
    finally:
        if not a.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(f"\n# total {elapsed:.0f} s, loadavg(after) {loadavg()}")
    after = git_revision()
    if after != bench.results["meta"]["revision"]:
        # Child processes (P5, P6, the restore profile) import the code as it is when they start;
        # that matters only when oma_actors is imported from this checkout.
        where = os.path.dirname(oma_actors.__file__)
        print(f"# note: the checkout changed during the run (now {after}); oma_actors from {where}")
    if a.json:
        bench.results["meta"]["total_s"] = elapsed
        with open(a.json, "w") as handle:
            json.dump(bench.results, handle, indent=1, default=str)


if __name__ == "__main__":
    main()

"""BENCH.md P1-P6: what checkpointing costs, side by side with its floors and with LangGraph.

Every figure is a ratio of two things measured in the same run. Repeats are interleaved (the
order of the variants rotates from one repeat to the next) and each table reports the median
over the repeats. Differences under 1.3x are noise on these shared machines; a verdict that close
to its goal is marked as such.

The workload is a real ``OpenMultiAgent().run_tasks`` of one task on one agent with a
zero-latency ``ScriptedAdapter``: every model call asks for one ``echo`` tool call, whose result
is ``--payload`` bytes (1 KiB), so every agent turn appends about 1 KiB to the conversation and
crosses three durable boundaries (assistant tool turn, tool commit, tool results). The LangGraph
anchor is the graph of ``shared/bench/langgraph_bench.py`` (``channel=add``: a model node and a
tool node, each appending one 1 KiB message per step), copied here so this script runs anywhere.

* P1 one durable save of a real snapshot of that run (1, 16, 64 KiB), ``Checkpoint.save`` on a
  ``FileStore`` and an ``InMemoryStore``, vs the floor: the same bytes the FileStore wrote, to a
  temp file + fsync + rename + directory fsync with plain ``os`` calls in a worker thread; and vs
  LangGraph SqliteSaver's time added per step on a run that stays under 64 KiB.
* P2 time added per agent turn by checkpointing on a FileStore (300 turns) vs LangGraph
  SqliteSaver's time added per two steps (300 x 1 KiB).
* P3 bytes written (``/proc/self/io`` ``write_bytes``, not file sizes) over 1000 turns, and the
  growth exponent of cumulative bytes vs turns. FileStore rewrites its whole file on every save,
  so it is expected to be quadratic and to miss P3.
* P4 per-turn cost drift, median of the last decile / median of the first, same 1000-turn run.
* P5 restore of that run in a fresh process: from after import to the first resumed model call.
* P6 ``import oma_actors``: ``python -X importtime`` and a fresh interpreter's wall time vs
  ``python -c pass``.

LangGraph is optional (``pip install -r bench/requirements.txt``); without it the LangGraph
column is skipped and says so.

Run: ``.venv/bin/python bench/checkpoint.py [--quick] [--json PATH] [--only P1,P3]``.

This file is the entry point: the command line, the header and the order of the figures. Each
figure lives in its own module (``checkpoint_p1.py`` .. ``checkpoint_p6.py``); the workload, the
LangGraph anchor, the shared formatting and the P5 child processes live beside them
(``checkpoint_workload.py``, ``checkpoint_langgraph.py``, ``checkpoint_report.py``,
``checkpoint_child.py``).
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
from checkpoint_langgraph import langgraph_versions
from checkpoint_report import KIB, NOISE, median
from checkpoint_settings import Bench, settings

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
        "# oma-actors checkpoint benchmark (BENCH.md P1-P6)",
        f"# date      {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"# python    {sys.version.split()[0]} on {platform.platform()}, event loop: {loop}",
        f"# cpus      {os.cpu_count()}  loadavg(before) {loadavg()}",
        f"# revision  {git_revision()}",
        f"# langgraph {lg if lg else 'LangGraph columns skipped: ' + s.lg_skipped}",
        f"# workdir   {s.workdir} (fs: {fs or 'unknown'})",
        f"# settings  {'--quick ' if s.quick else ''}repeats={s.repeats} payload={s.payload}B"
        f" P2 turns={s.p2_turns} P3/P4/P5 turns={s.long_turns}",
        f"# noise     fixed loop median {probe['median_ms']:.2f} ms,"
        f" CV {probe['cv'] * 100:.1f}% (differences under {NOISE}x are noise)",
    ]
    print("\n".join(lines), flush=True)
    bench.results["meta"] = {
        "settings": {k: getattr(s, k) for k in s.__slots__},
        "langgraph": lg,
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
    a = ap.parse_args()
    lg = None if a.no_langgraph else langgraph_versions()
    workdir = a.workdir or tempfile.mkdtemp(prefix="oma-cpbench-")
    os.makedirs(workdir, exist_ok=True)
    s = settings(a, workdir, lg is not None)
    if a.no_langgraph:
        s.lg_skipped = "--no-langgraph"
    only = {x.strip().upper() for x in a.only.split(",") if x.strip()}
    started = time.perf_counter()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            bench = Bench(s, runner)
            header(bench, lg)
            if "P1" in only:
                checkpoint_p1.run(bench)
            if "P2" in only:
                checkpoint_p2.run(bench)
            if "P3" in only or "P4" in only:
                runs = checkpoint_p3.long_runs(bench)
                checkpoint_p3.run(bench, runs)
                checkpoint_p4.run(bench, runs)
            if "P5" in only:
                checkpoint_p5.run(bench)
            if "P6" in only:
                checkpoint_p6.run(bench)
    finally:
        if not a.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(f"\n# total {elapsed:.0f} s, loadavg(after) {loadavg()}")
    if a.json:
        bench.results["meta"]["total_s"] = elapsed
        with open(a.json, "w") as handle:
            json.dump(bench.results, handle, indent=1, default=str)


if __name__ == "__main__":
    main()

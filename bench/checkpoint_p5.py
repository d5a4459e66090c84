"""P5: restore of the long run in a fresh process, from after import to the first model call.

Every child gets a fresh copy of the captured FileStore file, because restore writes an
admission snapshot. A separate child times only ``FileStore.open`` + ``Checkpoint.load_latest``.
LangGraph: a child crashes at the last step, then fresh children time ``invoke(None)`` from after
import to the first resumed node. The children run ``checkpoint_child.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from checkpoint_report import GOALS, fmt_bytes, fmt_ratio, fmt_time, median, rotated, table, verdict
from checkpoint_settings import Bench
from checkpoint_workload import RUN_ID, Trace, bench_agent, remove_quietly, run_ours

from oma_actors import Checkpoint, CheckpointOptions, FileStore, Message, OpenMultiAgent, Team
from oma_actors.actors import event_loop_factory
from oma_actors.checkpoint import CheckpointSnapshot

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint_child.py")


def child_restore(args: argparse.Namespace) -> None:
    """Restore the captured run; print seconds from here (after import) to the first model call."""
    t0 = time.perf_counter()
    trace = Trace()

    def on_first(n: int, messages: Sequence[Message]) -> None:
        t1 = time.perf_counter()
        out = {"seconds": t1 - t0, "messages": len(messages)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        os._exit(0)

    async def go() -> None:
        agent = bench_agent(1, args.payload, trace, on_first, max_turns=args.turns + 10)
        store = FileStore(args.store)
        options = CheckpointOptions(store=store, run_id=RUN_ID)
        await OpenMultiAgent().restore(Team("bench", [agent]), checkpoint=options)

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(go())
    sys.stdout.write(json.dumps({"error": "the restored run made no model call"}) + "\n")


def child_load(args: argparse.Namespace) -> None:
    """Only open the FileStore and load + decode the snapshot (a part of child_restore)."""
    t0 = time.perf_counter()

    async def go() -> CheckpointSnapshot | None:
        async with FileStore.open(args.store) as store:
            return await Checkpoint(store, run_id=RUN_ID).load_latest()

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        snapshot = runner.run(go())
    t1 = time.perf_counter()
    n = len(snapshot.in_flight[0].state.conversation) if snapshot and snapshot.in_flight else 0
    print(json.dumps({"seconds": t1 - t0, "messages": n}))


def run_child(mode: str, store: str, turns: int, payload: int) -> dict[str, Any]:
    """Run one child of ``checkpoint_child.py``; its last stdout line parsed, or an error."""
    cmd = [sys.executable, CHILD, "--_child", mode, "--_store", store]
    cmd += ["--_turns", str(turns), "--_payload", str(payload)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = p.stdout.strip().splitlines()
    if mode == "lg-crash" and p.returncode == 0 and not lines:
        return {}  # it died at the crash step, as it should
    if p.returncode != 0 or not lines:
        return {"error": f"{mode}: rc={p.returncode} {p.stderr[-600:]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def copy_db(src: str, dst: str) -> None:
    """Copy a SQLite database with its -wal and -shm files."""
    remove_quietly(dst)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, dst + suffix)


def run(bench: Bench) -> None:
    """Measure P5, print its table and store its results under ``P5``."""
    s = bench.s
    n = s.long_turns
    if bench.restore_source is None:  # P3 did not run: capture a run of its own
        capture = os.path.join(s.workdir, "restore-source.json")
        bench.runner.run(run_ours("file", n, s.payload, s.workdir, capture_to=capture))
        bench.restore_source = capture
    src = bench.restore_source
    work = os.path.join(s.workdir, "restore-copy.json")
    lg_src = os.path.join(s.workdir, "lg-crashed.sqlite")
    lg_work = os.path.join(s.workdir, "lg-resume.sqlite")
    if s.langgraph:
        remove_quietly(lg_src)
        crash = run_child("lg-crash", lg_src, n, s.payload)
        if crash.get("error"):
            print(f"# LangGraph crash child failed: {crash['error']}")
    samples: dict[str, list[dict[str, Any]]] = {"restore": [], "load": [], "lg": []}
    variants = ["restore", "load"] + (["lg"] if s.langgraph else [])
    for rep in range(s.child_repeats):
        for name in rotated(variants, rep):
            if name == "lg":
                copy_db(lg_src, lg_work)
                out = run_child("lg-resume", lg_work, n, s.payload)
            else:
                shutil.copyfile(src, work)  # restore writes: every child gets a fresh copy
                out = run_child(name, work, n, s.payload)
            if out.get("error"):
                print(f"# P5 child {name} failed: {out['error']}")
                continue
            samples[name].append(out)
    remove_quietly(work)
    remove_quietly(lg_work)
    remove_quietly(lg_src)

    def med(name: str) -> float:
        return median([o["seconds"] for o in samples[name]])

    restore = med("restore")
    res: dict[str, Any] = {
        "turns": n,
        "store_bytes": os.path.getsize(src),
        "restore_s": restore,
        "load_s": med("load"),
        "samples": samples,
    }
    print(
        f"\n## P5 restore in a fresh process, {n}-turn run ({fmt_bytes(res['store_bytes'])}"
        f" FileStore file): after import -> first resumed model call (goal: <="
        f" {fmt_time(GOALS['P5'])})\n"
    )
    msgs = samples["restore"][0]["messages"] if samples["restore"] else 0
    rows = [
        [
            f"ours: FileStore open + restore() -> first model call ({msgs} messages)",
            fmt_time(restore),
            fmt_ratio(restore / GOALS["P5"]),
            verdict(restore, GOALS["P5"]),
        ],
        [
            "  of which: FileStore open + Checkpoint.load_latest (separate child)",
            fmt_time(res["load_s"]),
            "",
            "",
        ],
    ]
    if s.langgraph and samples["lg"]:
        lg = med("lg")
        res["langgraph_s"] = lg
        lg_msgs = samples["lg"][0]["messages"]
        rows.append(
            [
                f"LangGraph: SqliteSaver open + invoke(None) -> first node ({lg_msgs} msgs)",
                fmt_time(lg),
                fmt_ratio(lg / GOALS["P5"]),
                f"ours / LangGraph = {fmt_ratio(restore / lg)}",
            ]
        )
    elif not s.langgraph:
        rows.append(["LangGraph", f"skipped: {s.lg_skipped}", "", ""])
    print(f"median of {s.child_repeats} interleaved child processes\n")
    print(table(["variant", "time", "x goal", "verdict"], rows))
    bench.results["P5"] = res


# ---------------------------------------------------------------- P6

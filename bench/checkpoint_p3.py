"""P3: bytes written over a long run (``/proc/self/io`` write_bytes), and their growth exponent.

The long runs made here also serve P4 (the same runs, timed turn by turn) and P5 (the FileStore
file of the first run, captured at its last boundary, is what P5 restores).
"""

from __future__ import annotations

import gc
import math
import os
from typing import Any

from checkpoint_langgraph import run_langgraph
from checkpoint_report import (
    GOALS,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    growth_exponent,
    median,
    rotated,
    table,
    verdict,
)
from checkpoint_settings import Bench
from checkpoint_workload import RunResult, run_ours


def long_runs(bench: Bench) -> dict[str, list[RunResult]]:
    """The interleaved long runs of P3 and P4: ours with and without FileStore, and LangGraph."""
    s = bench.s
    n = s.long_turns
    capture = os.path.join(s.workdir, "restore-source.json")
    runs: dict[str, list[RunResult]] = {"file": [], "none": [], "lg:none": [], "lg:sqlite": []}
    variants = ["file", "none"] + (["lg:none", "lg:sqlite"] if s.langgraph else [])
    for rep in range(s.repeats):
        for name in rotated(variants, rep):
            if name.startswith("lg:"):
                kind = name[3:]
                r = bench.gc_run(lambda k=kind: run_langgraph(k, n, s.payload, s.workdir))
            else:
                cap = capture if name == "file" and bench.restore_source is None else None
                gc.collect()
                r = bench.runner.run(run_ours(name, n, s.payload, s.workdir, capture_to=cap))
                if cap is not None:
                    bench.restore_source = cap
            runs[name].append(r)
            print(f"#   {name:9s} repeat {rep + 1}: {fmt_time(r.total_s)}", flush=True)
    return runs


def run(bench: Bench, runs: dict[str, list[RunResult]]) -> None:
    """Report P3 from ``runs``, print its table and store its results under ``P3``."""
    s = bench.s
    n = s.long_turns
    marks = sorted({max(1, n // 10), max(1, (3 * n) // 10), n})

    def byte_stats(rs: list[RunResult]) -> dict[str, Any]:
        cums = [r.cumulative_bytes for r in rs]
        at = {m: median([c[m - 1] for c in cums]) for m in marks}
        return {
            "total": median([c[-1] for c in cums]),
            "at": at,
            "exponent": median([growth_exponent(c) for c in cums]),
            "pairwise_exponent": math.log(at[n] / at[marks[0]]) / math.log(n / marks[0])
            if at[marks[0]] > 0 and at[n] > 0
            else math.nan,
        }

    ours_b = byte_stats(runs["file"])
    res3: dict[str, Any] = {"turns": n, "filestore": ours_b}
    print(
        f"\n## P3 bytes written over {n} turns x ~{fmt_bytes(s.payload)}, /proc/self/io"
        f" write_bytes (goal: <= {fmt_bytes(GOALS['P3_bytes'])}"
        f" over 1000 turns, growth exponent <= {GOALS['P3_exponent']})"
    )
    print(
        "FileStore rewrites its whole JSON file on every save, so the bytes per save grow with"
        " the conversation and the total is quadratic: it is expected to miss P3 (BENCH.md)."
        f" Median of {s.repeats} repeats.\n"
    )
    headers = ["variant", *[f"after {m}" for m in marks], "exponent (fit)", "verdict"]
    content = n * s.payload
    rows = [
        [
            "ours, FileStore",
            *[fmt_bytes(ours_b["at"][m]) for m in marks],
            f"{ours_b['exponent']:.2f} ({marks[0]}->{n}: {ours_b['pairwise_exponent']:.2f})",
            f"bytes: {verdict(ours_b['total'], GOALS['P3_bytes'])}; growth:"
            f" {verdict(ours_b['exponent'], GOALS['P3_exponent'])}",
        ]
    ]
    if s.langgraph:
        lg_b = byte_stats(runs["lg:sqlite"])
        res3["langgraph"] = lg_b
        rows.append(
            [
                "LangGraph SqliteSaver sync (steps)",
                *[fmt_bytes(lg_b["at"][m]) for m in marks],
                f"{lg_b['exponent']:.2f} ({marks[0]}->{n}: {lg_b['pairwise_exponent']:.2f})",
                f"ours / LangGraph = {fmt_ratio(ours_b['total'] / lg_b['total'])}",
            ]
        )
    print(table(headers, rows))
    print(
        f"\nmessage content after {n} turns: {fmt_bytes(content)}; FileStore wrote"
        f" {ours_b['total'] / content:.0f}x that."
        + (" (--quick: scaled run, the byte goal is for 1000 turns)" if n != 1000 else "")
    )
    bench.results["P3"] = res3

"""P4: per-turn cost drift over the long runs of P3, median of the last decile / the first."""

from __future__ import annotations

from typing import Any

from checkpoint_report import GOALS, drift, fmt_ratio, fmt_time, median, table, verdict
from checkpoint_settings import Bench
from checkpoint_workload import RunResult


def run(bench: Bench, runs: dict[str, list[RunResult]]) -> None:
    """Report P4 from ``runs``, print its table and store its results under ``P4``."""
    s = bench.s
    n = s.long_turns
    res4: dict[str, Any] = {"turns": n}
    print(
        f"\n## P4 per-turn cost drift over {n} turns, median of last decile / median of first"
        f" decile (goal: <= {GOALS['P4']}x)\n"
    )
    rows = []
    for key, label in (
        ("file", "ours, FileStore (per turn = 3 saves)"),
        ("none", "ours, no checkpoint"),
        ("lg:sqlite", "LangGraph SqliteSaver sync (per step)"),
        ("lg:none", "LangGraph, no checkpointer (per step)"),
    ):
        rs = runs[key]
        if not rs:
            continue
        first = median([median(r.intervals[: max(1, n // 10)]) for r in rs])
        last = median([median(r.intervals[-max(1, n // 10) :]) for r in rs])
        d = median([drift(r.intervals) for r in rs])
        res4[key] = {"first_decile_s": first, "last_decile_s": last, "drift": d}
        check = verdict(d, GOALS["P4"]) if key == "file" else ""
        rows.append([label, fmt_time(first), fmt_time(last), fmt_ratio(d), check])
    if not s.langgraph:
        rows.append(["LangGraph", f"skipped: {s.lg_skipped}", "", "", ""])
    print(table(["variant", "first decile", "last decile", "drift", "verdict"], rows))
    bench.results["P4"] = res4


# ---------------------------------------------------------------- P5

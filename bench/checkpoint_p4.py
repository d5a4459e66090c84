"""P4: per-turn cost drift over the long runs of P3, median of the last decile / the first.

Each column is the median over repeats of each run's decile median, and the drift is the ratio
of those two columns.
"""

from __future__ import annotations

import itertools
from typing import Any

from checkpoint_report import GOALS, drift, fmt_ratio, fmt_time, median, table, verdict
from checkpoint_settings import CONFIGS, OURS, Bench
from checkpoint_workload import RunResult

LABELS = {
    "none": "ours, no checkpoint",
    "floor": "append floor, per turn (interleaved in all our runs)",
    "file": f"{CONFIGS['file']} (per turn)",
    "journal": f"{CONFIGS['journal']} (per turn)",
    "lg:sqlite": f"{CONFIGS['lg:sqlite']} (per step)",
    "lg:none": "LangGraph, no checkpointer (per step)",
    "lg:delta": f"{CONFIGS['lg:delta']} (per step)",
    "lg:delta-none": "LangGraph DeltaChannel, no checkpointer (per step)",
}


def run(bench: Bench, runs: dict[str, list[RunResult]]) -> None:
    """Report P4 from ``runs``, print its table and store its results under ``P4``."""
    s = bench.s
    n = s.long_turns
    dec = max(1, n // 10)
    res: dict[str, Any] = {"turns": n}
    print(
        f"\n## P4 per-turn cost drift over {n} turns, median of the last decile / median of the"
        f" first decile (goal: <= {GOALS['P4']}x), median of {s.repeats} repeats\n"
    )
    rows = []
    for key, label in LABELS.items():
        series = floor_series(runs) if key == "floor" else [r.intervals for r in runs.get(key, [])]
        if not series:
            continue
        first = median([median(x[:dec]) for x in series])
        last = median([median(x[-dec:]) for x in series])
        # The drift shown is the ratio of the two columns beside it, so the row never
        # contradicts itself (a median of per-run ratios can land outside last / first); the
        # per-run median is kept in the results.
        d = last / first if first > 0 else float("nan")
        res[key] = {
            "first_decile_s": first,
            "last_decile_s": last,
            "drift": d,
            "drift_per_run_median": median([drift(x) for x in series]),
        }
        check = verdict(d, GOALS["P4"]) if key in OURS else ""
        rows.append([label, fmt_time(first), fmt_time(last), fmt_ratio(d), check])
        if key in CONFIGS:
            word = f" {check.split(' ')[0]}" if check else ""
            detail = f"{fmt_time(first)} -> {fmt_time(last)}"
            bench.cell("P4 drift", key, f"{fmt_ratio(d)} ({detail}){word}")
    if not s.langgraph:
        rows.append(["LangGraph", f"skipped: {s.lg_skipped}", "", "", ""])
    print(table(["variant", "first decile", "last decile", "drift", "verdict"], rows))
    bench.results["P4"] = res


def floor_series(runs: dict[str, list[RunResult]]) -> list[list[float]]:
    """Per run of ours, the floor's time in each turn (the appends interleaved in that turn)."""
    out = []
    for name in ("none", *OURS):
        for r in runs.get(name, []):
            if r.probe is None:
                continue
            stamps = r.trace.stamps[: r.turns + 1]
            out.append([r.probe.floor_between(a, b) for a, b in itertools.pairwise(stamps)])
    return out

"""P2: time added per agent turn by checkpointing, vs LangGraph SqliteSaver's two steps.

(run with a FileStore checkpoint - the same run with ``checkpoint=False``) / turns, interleaved
run by run with an InMemoryStore run and LangGraph's runs with and without SqliteSaver.
"""

from __future__ import annotations

import gc
from typing import Any

from checkpoint_langgraph import run_langgraph
from checkpoint_report import GOALS, fmt_bytes, fmt_ratio, fmt_time, median, rotated, table, verdict
from checkpoint_settings import Bench
from checkpoint_workload import run_ours


def run(bench: Bench) -> None:
    """Measure P2, print its table and store its results under ``P2``."""
    s = bench.s
    n = s.p2_turns
    ours: dict[str, list[float]] = {"none": [], "file": [], "memory": []}
    lg: dict[str, list[float]] = {"none": [], "sqlite": []}
    variants = ["ours:none", "ours:file", "ours:memory"]
    variants += ["lg:none", "lg:sqlite"] if s.langgraph else []
    for rep in range(s.repeats):
        for name in rotated(variants, rep):
            side, kind = name.split(":")
            if side == "ours":
                gc.collect()
                r = bench.runner.run(run_ours(kind, n, s.payload, s.workdir))
                ours[kind].append(r.per_turn)
            else:
                r = bench.gc_run(lambda k=kind: run_langgraph(k, n, s.payload, s.workdir))
                lg[kind].append(r.per_turn)
    base = median(ours["none"])
    added = median(ours["file"]) - base
    added_mem = median(ours["memory"]) - base
    res: dict[str, Any] = {
        "turns": n,
        "ours_per_turn_s": {k: median(v) for k, v in ours.items()},
        "ours_added_per_turn_s": added,
        "ours_added_per_turn_memory_s": added_mem,
        "repeats": {"ours": ours, "langgraph": lg},
    }
    print(
        f"\n## P2 per agent turn (model + one tool = 3 durable boundaries), {n} turns x"
        f" ~{fmt_bytes(s.payload)} (goal: <= 1/3 of LangGraph SqliteSaver's two steps)"
    )
    print(
        f"median of {s.repeats} interleaved repeats of whole runs; per turn = run time / turns;"
        " added = with checkpoint - without\n"
    )
    rows = [
        ["ours, no checkpoint", fmt_time(base), "-", "-", "-"],
        ["ours, FileStore", fmt_time(median(ours["file"])), fmt_time(added), "", ""],
        [
            "ours, InMemoryStore (not durable)",
            fmt_time(median(ours["memory"])),
            fmt_time(added_mem),
            "",
            "",
        ],
    ]
    if s.langgraph:
        lg_none, lg_sqlite = median(lg["none"]), median(lg["sqlite"])
        two = 2 * (lg_sqlite - lg_none)
        ratio = added / two
        res["langgraph"] = {
            "per_step_none_s": lg_none,
            "per_step_sqlite_s": lg_sqlite,
            "added_two_steps_s": two,
            "ours_over_langgraph": ratio,
        }
        rows[1][3:] = [fmt_ratio(ratio), verdict(ratio, GOALS["P2"])]
        rows[2][3] = fmt_ratio(added_mem / two)
        rows.append(
            [
                f"LangGraph, no checkpointer, 2 steps ({n} x {fmt_bytes(s.payload)})",
                fmt_time(2 * lg_none),
                "-",
                "-",
                "-",
            ]
        )
        rows.append(
            [
                "LangGraph, SqliteSaver sync, 2 steps",
                fmt_time(2 * lg_sqlite),
                fmt_time(two),
                "1.00x",
                "(anchor)",
            ]
        )
    else:
        rows[1][3:] = ["n/a", f"LangGraph column skipped: {s.lg_skipped}"]
    headers = ["variant", "per turn", "added per turn", "ours / LangGraph", "verdict"]
    print(table(headers, rows))
    bench.results["P2"] = res

"""P6: ``import oma_actors`` in a fresh interpreter, vs ``python -c pass`` and vs LangGraph."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from typing import Any

from checkpoint_report import GOALS, fmt_ratio, fmt_time, median, rotated, table, verdict
from checkpoint_settings import Bench

IMPORTTIME = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def importtime(module: str) -> tuple[float, list[tuple[int, str]]]:
    """Cumulative seconds of ``module`` under -X importtime, and the heaviest direct imports."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [m for m in map(IMPORTTIME.match, p.stderr.splitlines()) if m]
    total = 0
    top: list[tuple[int, str]] = []
    base_indent = None
    for m in rows:
        if m.group(4) == module:
            total = int(m.group(2))
            base_indent = len(m.group(3))
    if base_indent is not None:
        for m in rows:
            if len(m.group(3)) == base_indent + 2:  # imported directly by the top module
                top.append((int(m.group(2)), m.group(4)))
    top.sort(reverse=True)
    return total / 1e6, top[:6]


def wall(code: str) -> float:
    """Seconds of a fresh ``python -c code``."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t0


def run(bench: Bench) -> None:
    """Measure P6, print its table and store its results under ``P6``."""
    s = bench.s
    cum: list[float] = []
    tops: list[list[tuple[int, str]]] = []
    walls: dict[str, list[float]] = {"bare": [], "oma": [], "lg": []}
    codes = {
        "bare": "pass",
        "oma": "import oma_actors",
        "lg": "import langgraph.graph, langgraph.checkpoint.sqlite",
    }
    variants = ["importtime", "bare", "oma"] + (["lg"] if s.langgraph else [])
    for rep in range(s.import_repeats):
        for name in rotated(variants, rep):
            if name == "importtime":
                total, top = importtime("oma_actors")
                cum.append(total)
                tops.append(top)
            else:
                walls[name].append(wall(codes[name]))
    it = median(cum)
    bare, oma = median(walls["bare"]), median(walls["oma"])
    res: dict[str, Any] = {
        "importtime_s": it,
        "wall_bare_s": bare,
        "wall_oma_s": oma,
        "wall_added_s": oma - bare,
        "importtime_top": tops[-1] if tops else [],
        "repeats": {"importtime": cum, **walls},
    }
    print(
        f"\n## P6 import oma_actors in a fresh interpreter (goal: <= {fmt_time(GOALS['P6'])};"
        f" page cache warm, .pyc present), median of {s.import_repeats} interleaved runs\n"
    )
    rows = [
        [
            "python -X importtime -c 'import oma_actors' (cumulative)",
            fmt_time(it),
            fmt_ratio(it / GOALS["P6"]),
            verdict(it, GOALS["P6"]),
        ],
        [
            "wall: python -c 'import oma_actors' - python -c pass",
            f"{fmt_time(oma - bare)} ({fmt_time(oma)} - {fmt_time(bare)})",
            fmt_ratio((oma - bare) / GOALS["P6"]),
            verdict(oma - bare, GOALS["P6"]),
        ],
    ]
    if s.langgraph:
        lg = median(walls["lg"])
        res["wall_langgraph_added_s"] = lg - bare
        rows.append(
            [
                "wall: import langgraph.graph + checkpoint.sqlite - python -c pass",
                fmt_time(lg - bare),
                fmt_ratio((lg - bare) / GOALS["P6"]),
                f"ours / LangGraph = {fmt_ratio((oma - bare) / (lg - bare))}",
            ]
        )
    print(table(["measure", "time", "x goal", "verdict"], rows))
    if tops:
        heavy = ", ".join(f"{name} {us / 1e3:.0f} ms" for us, name in tops[-1])
        print(f"\nheaviest direct imports of oma_actors (cumulative): {heavy}")
    bench.results["P6"] = res

"""P3: bytes written over a long run, logical (``wchar``) and disk (``write_bytes``), and growth.

Both are read from ``/proc/self/io`` at every model call (LangGraph: every node entry), so they
count what the process really wrote, not file sizes: ``wchar`` is every byte handed to a write
call (temp files, rewrites, SQLite's WAL and pages), ``write_bytes`` what reached the block layer
(whole pages: an fsync'd append of 2 KiB costs at least one 4 KiB page). The growth exponent is
the slope of log(cumulative logical bytes) against log(turns) over the upper 90% of the turns;
the 100 -> 1000 two-point slope is shown beside it. The floor's bytes are those of the ``floor``
run (the journal's bytes per boundary, appended + fdatasync'd).

The long runs made here also serve P2 at 1000 turns, P4 (the same runs, turn by turn) and P5
(the files of the first ``file`` and ``journal`` runs, captured at their last boundary).
LangGraph's runs carry the same floor appends (two steps make one of our turns, so a 1000-step
run carries the floor of 500 turns) and its disk ratio is against the floor of its own runs.
"""

from __future__ import annotations

import math
import os
from typing import Any

from checkpoint_report import (
    GOALS,
    fmt_bytes,
    fmt_ratio,
    growth_exponent,
    median,
    table,
    verdict,
)
from checkpoint_runs import all_variants, interleaved
from checkpoint_settings import CONFIGS, OURS, Bench
from checkpoint_workload import RunResult


def long_runs(bench: Bench) -> dict[str, list[RunResult]]:
    """The interleaved long runs of every variant; captures ``file`` and ``journal`` for P5."""
    s = bench.s
    capture = {name: os.path.join(s.workdir, f"restore-{name}") for name in OURS}
    return interleaved(bench, all_variants(bench), s.long_turns, capture=capture, verbose=True)


def byte_stats(rs: list[RunResult], n: int) -> dict[str, Any]:
    """Totals (the whole run, its end included), marks and growth exponents of ``rs``'s bytes."""
    return series_stats(
        [r.cumulative_wchar for r in rs],
        [r.cumulative_bytes for r in rs],
        n,
        ([r.total_wchar for r in rs], [r.total_bytes for r in rs]),
    )


def floor_stats(rs: list[RunResult], n: int) -> dict[str, Any]:
    """The same for the floor appends interleaved in ``rs`` (their thread's own bytes)."""
    return series_stats(
        [r.floor_cumulative[0] for r in rs],
        [r.floor_cumulative[1] for r in rs],
        n,
        ([r.floor_total[0] for r in rs], [r.floor_total[1] for r in rs]),
    )


def series_stats(
    logical: list[list[int]],
    disk: list[list[int]],
    n: int,
    totals: tuple[list[int], list[int]],
) -> dict[str, Any]:
    """Totals, marks and growth exponents of cumulative logical and disk byte series.

    ``totals`` are the whole runs' bytes, their end included: the per-turn series stop at the
    last model call, before the final answer's boundaries and the run's last snapshots (once
    40% of a journal-first run's bytes).
    """
    marks = sorted({max(1, n // 10), n})
    out: dict[str, Any] = {}
    for key, series, ends in (("logical", logical, totals[0]), ("disk", disk, totals[1])):
        at = {m: median([c[m - 1] for c in series]) for m in marks}
        lo, hi = at[marks[0]], at[n]
        out[key] = {
            "total": median(ends),
            "at": at,
            "exponent": median([growth_exponent(c) for c in series]),
            "pairwise_exponent": math.log(hi / lo) / math.log(n / marks[0])
            if lo > 0 and hi > 0 and n > marks[0]
            else math.nan,
        }
    return out


def run(bench: Bench, runs: dict[str, list[RunResult]]) -> None:
    """Report P3 from ``runs``, print its table and store its results under ``P3``."""
    s = bench.s
    n = s.long_turns
    stats = {name: byte_stats(rs, n) for name, rs in runs.items() if rs}
    floored = [name for name, rs in runs.items() if rs and rs[0].probe is not None]
    floors = {name: floor_stats(runs[name], n) for name in floored}
    stats["floor"] = floor_stats([r for name in ("none", *OURS) for r in runs[name]], n)
    floor = stats["floor"]
    delta = stats.get("lg:delta")
    res: dict[str, Any] = {"turns": n, "stats": stats}
    print(
        f"\n## P3 bytes written over {n} turns x {s.payload} B (goal: logical <="
        f" {fmt_bytes(GOALS['P3_bytes'])} over 1000 turns, growth exponent <="
        f" {GOALS['P3_exponent']}; disk <= {GOALS['P3_disk_floor']}x the append floor's;"
        " beat DeltaChannel)"
    )
    print(
        "/proc/self/io of this process during the run: logical = wchar, disk = write_bytes;"
        " the floor appends interleaved in our runs are counted apart (their own thread's"
        " /proc/self/task/<tid>/io) and taken out of the runs' bytes; totals run to the end of"
        " the run (final answer, last snapshots, journal close); each configuration's"
        f" disk ratio is against the floor of its own runs; median of {s.repeats} repeats;"
        f" exponent = fit over the upper 90% of turns ({max(1, n // 10)}->{n} two-point slope"
        " in brackets)\n"
    )
    headers = ["variant", "logical", "exponent", "disk", "disk x floor's", "verdict"]
    rows = []
    for name in ("floor", "none", *OURS, "lg:sqlite", "lg:delta"):
        st = stats.get(name)
        if st is None:
            continue
        lo, disk = st["logical"], st["disk"]
        own = floors.get(name, floor)["disk"]["total"]
        disk_ratio = disk["total"] / own if own > 0 else math.nan
        text = ""
        if name in OURS:
            text = (
                f"logical {verdict(lo['total'], GOALS['P3_bytes']).split(' ')[0]}, growth"
                f" {verdict(lo['exponent'], GOALS['P3_exponent']).split(' ')[0]}, disk"
                f" {verdict(disk_ratio, GOALS['P3_disk_floor']).split(' ')[0]}"
            )
            if delta is not None:
                lr = lo["total"] / delta["logical"]["total"]
                dr = disk["total"] / delta["disk"]["total"]
                beat = "beats" if lr < 1 and dr < 1 else "does not beat"
                text += f"; {beat} DeltaChannel (logical {fmt_ratio(lr)}, disk {fmt_ratio(dr)})"
        label = {"none": "ours, no checkpoint", "floor": "append floor (our runs)"}.get(
            name
        ) or CONFIGS[name]
        rows.append(
            [
                label,
                fmt_bytes(lo["total"]),
                f"{lo['exponent']:.2f} ({lo['pairwise_exponent']:.2f})",
                fmt_bytes(disk["total"]),
                fmt_ratio(disk_ratio) if name not in ("none", "floor") else "",
                text,
            ]
        )
        if name in CONFIGS:
            summary(bench, name, lo, disk, disk_ratio)
    print(table(headers, rows))
    if not s.langgraph:
        print(f"\nLangGraph skipped: {s.lg_skipped}")
    content = n * s.payload
    print(
        f"\nmessage content after {n} turns: {fmt_bytes(content)}"
        + (" (--quick: a scaled run; the byte goal is for 1000 turns)" if n != 1000 else "")
    )
    bench.results["P3"] = res


def summary(
    bench: Bench, name: str, lo: dict[str, Any], disk: dict[str, Any], disk_ratio: float
) -> None:
    """The P3 cells of one configuration in the summary table."""
    ours = name in OURS
    word = f" {verdict(lo['total'], GOALS['P3_bytes']).split(' ')[0]}" if ours else ""
    bench.cell("P3 logical bytes", name, f"{fmt_bytes(lo['total'])}{word}")
    word = f" {verdict(lo['exponent'], GOALS['P3_exponent']).split(' ')[0]}" if ours else ""
    bench.cell("P3 growth exponent", name, f"{lo['exponent']:.2f}{word}")
    detail = f"{fmt_bytes(disk['total'])}"
    goal = GOALS["P3_disk_floor"] if ours else None
    bench.cell("P3 disk bytes", name, bench.floor_cell(f"P3 disk {name}", disk_ratio, detail, goal))

"""P1: time added per durable boundary of a running run, small state, vs the append floor.

First a calibration run of the journal configuration records how many bytes its journal grows
per boundary kind: those are the bytes that changed, and the floor appends that many. Then
short runs (``p1_turns`` turns, state up to about 64 KiB of snapshot) of ``none``, ``file`` and
``journal`` take turns run by run, each with the boundary probe of ``checkpoint_floor``: every
boundary of the run is timed on its real path (the agent loop waiting for its save, with the
writer's encode cache warm as in any run) and one floor append of that boundary's bytes is made
right before or after it, alternating. So the floor is interleaved save by save, on the same disk,
under the same load. Added per boundary = a configuration's boundary time - the same boundary
with ``checkpoint=False`` (a few microseconds). The table reports the median over repeats of each
run's median, by window of turns (small: the first ``p1_small_turns``) and by boundary kind.

A diagnostic row runs the journal path on a ``JsonlRunJournal`` in tmpfs (``journal-mem``): the
very save path of ``journal`` (journal-first, its saves count ``journal``), with writes that never
wait for a disk, so the table shows how much of a boundary is not the append. (An
``InMemoryRunJournal`` forgets what the store keeps, so the writer refuses it as a save path and
such a row measured the snapshot path.)

LangGraph's figure is the time added per step (median step with the saver - without, each step
net of the floor appends its node makes) in ``p1_lg_steps``-step runs, interleaved run by run
with ours, against the median floor append of its own runs.
"""

from __future__ import annotations

import gc
import math
import statistics
from typing import Any

from checkpoint_floor import TURN_KINDS, BoundaryProbe, BoundaryRecord, bytes_per_kind
from checkpoint_langgraph import median_interval
from checkpoint_report import (
    GOALS,
    floor_verdict,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    median,
    rotated,
    table,
)
from checkpoint_runs import run_one
from checkpoint_settings import CONFIGS, OURS, Bench
from checkpoint_workload import journal_file, run_ours

DIAG = "journal-mem"
DIAG_LABEL = "  diagnostic: journal-first, journal in tmpfs (CPU + hops, no disk wait)"


def calibrate(bench: Bench) -> dict[str, int]:
    """Bytes the journal configuration's journal grows per boundary kind (the floor's bytes)."""
    s = bench.s
    probe = BoundaryProbe(journal_path=journal_file(s.workdir, "journal"))
    gc.collect()
    bench.runner.run(
        run_ours(
            "journal", s.p1_turns, s.payload, s.workdir, probe=probe, durable=bench.shared.durable
        )
    )
    sizes = bytes_per_kind(probe.records)
    bench.shared.floor_sizes = sizes
    return sizes


def window(records: list[BoundaryRecord], lo: int, hi: int) -> list[BoundaryRecord]:
    """The per-turn boundaries of turns ``lo..hi``."""
    return [r for r in records if r.kind in TURN_KINDS and lo <= r.turn <= hi]


def run(bench: Bench) -> None:
    """Measure P1, print its tables and store its results under ``P1``."""
    s = bench.s
    sizes = calibrate(bench)
    runs: dict[str, list[list[BoundaryRecord]]] = {n: [] for n in ("none", *OURS, DIAG)}
    saves: dict[str, list[dict[str, int]]] = {"file": [], "journal": [], DIAG: []}
    lg: dict[str, list[float]] = {name: [] for name in bench.lg_variants()}
    lg_floor: list[float] = []
    names = ["none", *OURS, DIAG, *lg]
    for rep in range(s.p1_repeats):
        for name in rotated(names, rep):
            r = run_one(bench, name, s.p1_lg_steps if name.startswith("lg:") else s.p1_turns)
            if name.startswith("lg:"):
                lg[name].append(median_interval(r))
                if r.probe is not None:
                    lg_floor.extend(x.floor for x in r.probe.records if x.floor is not None)
                continue
            assert r.probe is not None
            runs[name].append(r.probe.records)
            if name in saves:
                saves[name].append(r.saves)
    windows = [(1, s.p1_small_turns), (s.p1_small_turns + 1, s.p1_turns)]
    res: dict[str, Any] = {"floor_bytes": sizes, "turns": s.p1_turns, "windows": {}}
    print(
        f"\n## P1 time added per durable boundary, small state ({s.p1_turns}-turn runs), vs the"
        f" append floor of the same bytes (goal: <= {GOALS['P1_floor']}x)"
    )
    print(
        f"median of {s.p1_repeats} interleaved repeats of each run's median; every boundary timed"
        " on the run's real save path, each with one floor append (os.write + fdatasync of the"
        " bytes the durable journal appended at that boundary kind, in a worker thread) right"
        " before or after it; added = boundary - the same boundary without a checkpoint."
        f" Floor bytes per boundary: {', '.join(f'{k} {fmt_bytes(v)}' for k, v in sizes.items())}"
        + ("" if bench.shared.durable else " (journal durable=False: journal-first not landed)")
        + "\n"
    )
    headers = ["configuration", "turns", *TURN_KINDS, "mean", "floor (syscalls)", "added median"]
    rows = []
    for lo, hi in windows:
        key = f"{lo}-{hi}"
        res["windows"][key] = {}
        base = median([median([r.seconds for r in window(rs, lo, hi)]) for rs in runs["none"]])
        for name in (*OURS, DIAG):
            fig = figure([window(rs, lo, hi) for rs in runs[name]], base)
            res["windows"][key][name] = fig
            kinds = [fmt_time(fig["by_kind_s"][k]) for k in TURN_KINDS]
            if name == DIAG:
                added = f"{fmt_time(fig['added_median_s'])} (not durable: no verdict)"
                rows.append([DIAG_LABEL, key, *kinds, fmt_time(fig["added_mean_s"]), "", added])
                continue
            med, floor, ratio = fig["added_median_s"], fig["floor_s"], fig["ratio"]
            text = floor_verdict(ratio, GOALS["P1_floor"])
            rows.append(
                [
                    CONFIGS[name],
                    key,
                    *kinds,
                    fmt_time(fig["added_mean_s"]),
                    f"{fmt_time(floor)} ({fmt_time(fig['floor_syscalls_s'])})",
                    f"{fmt_time(med)} = {fmt_ratio(ratio)}: {text}",
                ]
            )
            detail = f"{fmt_time(med)} vs {fmt_time(floor)}"
            cell = bench.floor_cell(f"P1 {name} turns {key}", ratio, detail, GOALS["P1_floor"])
            bench.cell(f"P1 turns {key}", name, cell)
    print(table(headers, rows))
    res["saves"] = saves
    print(f"\nsaves per run by mode (CheckpointSaved.mode): {saves_line(saves)}")
    if lg:
        report_langgraph(bench, res, lg, median(lg_floor))
    elif not s.langgraph:
        print(f"\nLangGraph skipped: {s.lg_skipped}")
    bench.results["P1"] = res


def figure(per_run: list[list[BoundaryRecord]], base: float) -> dict[str, Any]:
    """One configuration's P1 figures over the boundaries of a window, run by run.

    Each value is the median over runs of that run's median (or mean), less ``base`` (the
    same boundary's median without a checkpoint); the floor is the median of the floor appends
    interleaved in the same runs.
    """
    med = median([median([r.seconds for r in w]) - base for w in per_run])
    floor = median([median([r.floor for r in w if r.floor is not None]) for w in per_run])
    return {
        "added_median_s": med,
        "added_mean_s": median([statistics.fmean(r.seconds for r in w) - base for w in per_run]),
        "by_kind_s": {
            kind: median([median([r.seconds for r in w if r.kind == kind]) for w in per_run]) - base
            for kind in TURN_KINDS
        },
        "floor_s": floor,
        "floor_syscalls_s": median(
            [median([r.floor_inner for r in w if r.floor_inner is not None]) for w in per_run]
        ),
        "ratio": med / floor,
        "none_boundary_s": base,
    }


def saves_line(saves: dict[str, list[dict[str, int]]]) -> str:
    """``file {...}, journal {...}`` from the first run of each configuration."""
    return ", ".join(f"{name} {runs[0] if runs else {}}" for name, runs in saves.items())


def report_langgraph(
    bench: Bench,
    res: dict[str, Any],
    lg: dict[str, list[float]],
    floor: float,
) -> None:
    """LangGraph's added time per step (one step, one save) vs the median floor append."""
    s = bench.s
    rows = []
    res["langgraph"] = {"floor_s": floor}
    for name, base in (("lg:sqlite", "lg:none"), ("lg:delta", "lg:delta-none")):
        if name not in lg:
            continue
        added = median(lg[name]) - median(lg[base])
        ratio = added / floor if floor > 0 else math.nan
        res["langgraph"][name] = {"added_per_step_s": added, "ratio": ratio, "samples": lg}
        rows.append([CONFIGS[name], fmt_time(median(lg[name])), fmt_time(added), fmt_ratio(ratio)])
        cell = bench.floor_cell(f"P1 {name}", ratio, f"{fmt_time(added)} per step")
        for lo, hi in ((1, s.p1_small_turns), (s.p1_small_turns + 1, s.p1_turns)):
            bench.cell(f"P1 turns {lo}-{hi}", name, cell)
    print(
        f"\nLangGraph, {s.p1_lg_steps} steps x {fmt_bytes(s.payload)}, durability=sync: added per"
        " step = median step - median step without a checkpointer (each step net of the floor"
        " appends interleaved in it), vs the median floor append of the same LangGraph runs"
        f" ({fmt_time(floor)})\n"
    )
    print(table(["configuration", "median step", "added per step", "x floor"], rows))

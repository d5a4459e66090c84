"""Whole runs of every variant, interleaved run by run (P2 at 300 turns; P2-P5 at 1000 turns).

Variants: ours ``none``, ``file``, ``journal`` (``checkpoint_workload``) and LangGraph's
``lg:none``, ``lg:sqlite``, ``lg:delta-none``, ``lg:delta`` (``checkpoint_langgraph``). The order
rotates from one repeat to the next, so no variant always runs first or after the same neighbour.
Every run of ours carries the append floor, interleaved save by save through the boundary probe
(``checkpoint_floor``): one append + fdatasync of the durable journal's bytes at each boundary,
timed on its own and taken out of the run's time and bytes. So each run measures the floor
under the very same disk load as its saves, and the ratios of P2-P4 never compare a run made in
a quiet second with a floor measured in a busy one.
"""

from __future__ import annotations

import gc
import os

from checkpoint_floor import BoundaryProbe, FloorWriter
from checkpoint_langgraph import run_variant
from checkpoint_report import fmt_time, rotated
from checkpoint_settings import Bench
from checkpoint_workload import RunResult, run_ours


def run_one(bench: Bench, name: str, turns: int, capture_to: str | None = None) -> RunResult:
    """One run of variant ``name`` with ``turns`` turns (LangGraph: steps)."""
    s = bench.s
    settle()
    if name.startswith("lg:"):
        sizes = bench.shared.floor_sizes
        return bench.gc_run(lambda: run_variant(name, turns, s.payload, s.workdir, sizes))  # type: ignore[no-any-return]
    floor = FloorWriter(os.path.join(s.workdir, "floor.bin"), bench.shared.floor_sizes)
    probe = BoundaryProbe(floor=floor)
    gc.collect()
    try:
        return bench.runner.run(
            run_ours(
                name, turns, s.payload, s.workdir, capture_to=capture_to, probe=probe,
                durable=bench.shared.durable,
            )
        )  # fmt: skip
    finally:
        floor.close()


def settle() -> None:
    """Write back every dirty page before a run, so no run pays for the last one's writeback.

    Without it a FileStore run (gigabytes rewritten) leaves writeback that stalls the fsyncs of
    whatever runs next.
    """
    os.sync()


def interleaved(
    bench: Bench,
    names: list[str],
    turns: int,
    *,
    capture: dict[str, str] | None = None,
    verbose: bool = False,
) -> dict[str, list[RunResult]]:
    """``bench.s.repeats`` runs of each variant, interleaved run by run.

    Args:
        capture: per variant, a path prefix to capture its files to (first repeat only).
        verbose: print each run's total time as it ends (long runs: a sign of life).
    """
    runs: dict[str, list[RunResult]] = {name: [] for name in names}
    capture = dict(capture or {})
    for rep in range(bench.s.repeats):
        for name in rotated(names, rep):
            cap = capture.pop(name, None)
            r = run_one(bench, name, turns, cap)
            if cap is not None:
                bench.shared.restore_sources[name] = cap
            runs[name].append(r)
            if verbose:
                extra = f" saves {r.saves}" if r.saves else ""
                print(f"#   {name:13s} repeat {rep + 1}: {fmt_time(r.total_s)}{extra}", flush=True)
    return runs


def our_variants(bench: Bench) -> list[str]:
    """Ours: the baseline (``checkpoint=False``) and the two configurations."""
    return ["none", "file", "journal"]


def all_variants(bench: Bench) -> list[str]:
    """Ours and every LangGraph variant that can run here."""
    return [*our_variants(bench), *bench.lg_variants()]

"""The settings of one benchmark run and the state its figures share."""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from checkpoint_report import KIB, verdict_word

CONFIGS = {
    "file": "FileStore alone (OMA mode)",
    "journal": "FileStore + durable journal",
    "lg:sqlite": "LangGraph SqliteSaver",
    "lg:delta": "LangGraph DeltaChannel",
}
"""The four configurations compared side by side, by variant name."""

OURS = ("file", "journal")


@dataclass(slots=True)
class Settings:
    """Sizes and repeats of one run (``--quick`` scales them down for a smoke run)."""

    quick: bool
    repeats: int
    payload: int
    p1_turns: int
    p1_small_turns: int
    p1_repeats: int
    p1_lg_steps: int
    p2_turns: int
    long_turns: int
    child_repeats: int
    import_repeats: int
    langgraph: bool
    delta: bool
    workdir: str
    lg_skipped: str = "not installed (pip install -r bench/requirements.txt)"


@dataclass(slots=True)
class Shared:
    """What figures hand to each other.

    Attributes:
        durable: the journal configuration runs with ``durable=True`` (False only while
            journal-first durability is not available in this checkout: then it says so).
        floor_sizes: bytes the durable journal appends per boundary kind (the floor's bytes).
        restore_sources: per configuration, the files captured at the end of a long run
            (``<prefix>.json`` and, for the journal, ``<prefix>.jsonl``; LangGraph: a db).
        bugs: ratios below 1.0 against a floor, found in this run (bench bugs, not results).
        summary: per goal row and configuration, the figure for the final table.
    """

    durable: bool = True
    floor_sizes: dict[str, int] = field(default_factory=dict)
    restore_sources: dict[str, str] = field(default_factory=dict)
    bugs: list[str] = field(default_factory=list)
    summary: dict[str, dict[str, str]] = field(default_factory=dict)


class Bench:
    """What every figure shares: the settings, one event loop, the results, the shared state."""

    def __init__(self, s: Settings, runner: asyncio.Runner) -> None:
        self.s = s
        self.runner = runner
        self.results: dict[str, Any] = {}
        self.shared = Shared()

    def gc_run(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` after a full collection (as before every timed run of ours)."""
        gc.collect()
        return fn()

    def cell(self, row: str, config: str, text: str) -> None:
        """Put ``text`` in the summary table at ``row`` x ``config``."""
        self.shared.summary.setdefault(row, {})[config] = text

    def floor_cell(self, where: str, ratio: float, detail: str, goal: float | None = None) -> str:
        """The summary cell of a ratio against a floor; one below 1.0 is recorded as a bug.

        A ratio under 1.0 against a floor is a measurement error, not a result: it is listed at
        the end of the run and its cell says so instead of showing a verdict.
        """
        if ratio < 1.0:
            self.shared.bugs.append(f"{where}: {ratio:.2f}x the floor ({detail})")
            return f"BENCH BUG ({ratio:.2f}x < 1.0)"
        if math.isnan(ratio):
            return f"n/a ({detail})"
        word = "" if goal is None else " " + verdict_word(ratio, goal)
        return f"{ratio:.2f}x ({detail}){word}"

    def lg_variants(self, *, baselines: bool = True) -> list[str]:
        """The LangGraph variants that can run here (with their no-checkpointer baselines)."""
        if not self.s.langgraph:
            return []
        out = ["lg:none", "lg:sqlite"] if baselines else ["lg:sqlite"]
        if self.s.delta:
            out += ["lg:delta-none", "lg:delta"] if baselines else ["lg:delta"]
        return out


def settings(a: argparse.Namespace, workdir: str, langgraph: bool, delta: bool) -> Settings:
    """The settings for the parsed command line."""
    if a.quick:
        return Settings(
            quick=True,
            repeats=a.repeats or 3,
            payload=a.payload,
            p1_turns=16,
            p1_small_turns=4,
            p1_repeats=a.repeats or 3,
            p1_lg_steps=32,
            p2_turns=60,
            long_turns=150,
            child_repeats=3,
            import_repeats=3,
            langgraph=langgraph,
            delta=delta,
            workdir=workdir,
        )
    return Settings(
        quick=False,
        repeats=a.repeats or 3,
        payload=a.payload,
        p1_turns=16,
        p1_small_turns=4,
        p1_repeats=max(a.repeats or 3, 7),
        p1_lg_steps=32,
        p2_turns=300,
        long_turns=1000,
        child_repeats=5,
        import_repeats=7,
        langgraph=langgraph,
        delta=delta,
        workdir=workdir,
    )


__all__ = ["CONFIGS", "KIB", "OURS", "Bench", "Settings", "settings"]

"""The settings of one benchmark run and the state its figures share."""

from __future__ import annotations

import argparse
import asyncio
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from checkpoint_report import KIB


@dataclass(slots=True)
class Settings:
    """Sizes and repeats of one run (``--quick`` scales them down for a smoke run)."""

    quick: bool
    repeats: int
    payload: int
    p1_sizes: tuple[int, ...]
    p1_saves: int
    p1_repeats: int
    p1_lg_steps: int
    p2_turns: int
    long_turns: int
    child_repeats: int
    import_repeats: int
    langgraph: bool
    workdir: str
    lg_skipped: str = "not installed (pip install -r bench/requirements.txt)"


class Bench:
    """What every figure shares: the settings, one event loop, the results, the captured run.

    ``restore_source`` is the FileStore file P3 captured at the end of its first 1000-turn run;
    P5 restores it (or captures a run of its own when P3 did not run).
    """

    def __init__(self, s: Settings, runner: asyncio.Runner) -> None:
        self.s = s
        self.runner = runner
        self.results: dict[str, Any] = {}
        self.restore_source: str | None = None

    def gc_run(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` after a full collection (as before every timed run of ours)."""
        gc.collect()
        return fn()


def settings(a: argparse.Namespace, workdir: str, langgraph: bool) -> Settings:
    """The settings for the parsed command line."""
    if a.quick:
        return Settings(
            quick=True,
            repeats=a.repeats or 3,
            payload=a.payload,
            p1_sizes=(KIB, 16 * KIB, 64 * KIB),
            p1_saves=15,
            p1_repeats=a.repeats or 3,
            p1_lg_steps=60,
            p2_turns=60,
            long_turns=150,
            child_repeats=3,
            import_repeats=3,
            langgraph=langgraph,
            workdir=workdir,
        )
    return Settings(
        quick=False,
        repeats=a.repeats or 3,
        payload=a.payload,
        p1_sizes=(KIB, 16 * KIB, 64 * KIB),
        p1_saves=100,
        p1_repeats=max(a.repeats or 3, 5),
        p1_lg_steps=60,
        p2_turns=300,
        long_turns=1000,
        child_repeats=5,
        import_repeats=7,
        langgraph=langgraph,
        workdir=workdir,
    )

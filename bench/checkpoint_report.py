"""Shared helpers of the checkpoint benchmark: goals, statistics, interleaving and formatting.

Every figure module reports through these, so the tables of P1-P6 read the same way: times,
bytes and ratios formatted alike, a verdict against a goal that flags results within the 1.3x
noise band, and Markdown tables that can be pasted into ``bench/README.md`` as they are.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

NOISE = 1.3
KIB = 1024
MIB = 1024 * 1024
GOALS = {
    "P1_floor": 1.5,  # time added per boundary / the append floor of its bytes, at most
    "P2_floor": 1.5,  # time added per turn / the append floor of its three boundaries, at most
    "P2_langgraph": 1 / 3,  # added per turn / LangGraph's added time for two steps, at most
    "P3_bytes": 5 * MIB,  # logical bytes (wchar) written over 1000 turns, at most
    "P3_exponent": 1.1,  # growth exponent of the cumulative logical bytes, at most
    "P3_disk_floor": 1.5,  # disk bytes (write_bytes) / the append floor's disk bytes, at most
    "P4": 1.2,  # last decile / first decile, at most
    "P5": 0.010,  # seconds from after import to the first resumed model call, at most
    "P6": 0.3,  # seconds of `import oma_actors`, at most
}


def median(values: Sequence[float]) -> float:
    """The median of ``values``, or NaN when there are none."""
    return statistics.median(values) if values else math.nan


def drift(intervals: Sequence[float]) -> float:
    """Median of the last decile of ``intervals`` / median of the first decile."""
    dec = max(1, len(intervals) // 10)
    return median(intervals[-dec:]) / median(intervals[:dec])


def growth_exponent(cum: Sequence[int]) -> float:
    """Slope of log(cumulative bytes) vs log(step) over the upper 90% of steps (as the anchor)."""
    n = len(cum)
    pts = [
        (math.log(i + 1), math.log(c))
        for i, c in enumerate(cum)
        if i + 1 >= max(2, n // 10) and c > 0
    ]
    if len(pts) < 3:
        return math.nan
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    num = sum((x - mx) * (y - my) for x, y in pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return num / den if den else math.nan


def rotated(names: Sequence[str], repeat: int) -> list[str]:
    """``names`` rotated by ``repeat`` so no variant always runs first in a repeat."""
    shift = repeat % len(names)
    return list(names[shift:]) + list(names[:shift])


def fmt_time(seconds: float) -> str:
    """Seconds as s, ms or us with a precision that suits the value."""
    if math.isnan(seconds):
        return "n/a"
    if abs(seconds) >= 1.0:
        return f"{seconds:.2f} s"
    if abs(seconds) >= 0.01:
        return f"{seconds * 1e3:.1f} ms"
    if abs(seconds) >= 0.001:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} us"


def fmt_bytes(n: float) -> str:
    """Bytes as GiB, MiB, KiB or B."""
    if n < 0 or math.isnan(n):
        return "n/a"
    for unit, size in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def fmt_ratio(x: float) -> str:
    """A ratio as ``1.23x``."""
    return "n/a" if math.isnan(x) else f"{x:.2f}x"


def verdict(value: float, goal: float, *, at_most: bool = True) -> str:
    """PASS or MISS against ``goal``; flags results within the 1.3x noise band of the goal."""
    if math.isnan(value):
        return "n/a"
    ok = value <= goal if at_most else value >= goal
    word = "PASS" if ok else "MISS"
    if value > 0 and goal > 0 and max(value / goal, goal / value) < NOISE:
        word += " (within 1.3x noise of the goal)"
    return word


def verdict_word(value: float, goal: float, *, at_most: bool = True) -> str:
    """``PASS``, ``MISS`` or ``PASS~``/``MISS~`` (within the 1.3x noise band of the goal)."""
    text = verdict(value, goal, at_most=at_most)
    return text.split(" ")[0] + ("~" if "noise" in text else "")


def floor_verdict(ratio: float, goal: float) -> str:
    """The verdict of a ratio against a floor: below 1.0 is a bench bug, never a result.

    Nothing durable can take less than appending its bytes and syncing them, so a ratio under
    1.0 means the bench timed something other than what it claims (a block design, a cache the
    run does not have, a write that never reached the disk).
    """
    if math.isnan(ratio):
        return "n/a"
    if ratio < 1.0:
        return f"BENCH BUG ({ratio:.2f}x < 1.0: below the floor, not a result)"
    return verdict(ratio, goal)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (so the output can be pasted into bench/README.md as is)."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    return "\n".join([line, sep, *body])

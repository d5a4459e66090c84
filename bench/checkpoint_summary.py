"""The closing table: P1-P5 for the four configurations, from this one run.

Each cell was put there by its figure (``Bench.cell``); a ratio below 1.0 against a floor shows
as ``BENCH BUG`` (and is listed under the table), never as a result. ``PASS~`` / ``MISS~`` mark a
verdict within the 1.3x noise band of its goal. Goals apply to ours; LangGraph's cells are the
anchors' figures, measured the same way.
"""

from __future__ import annotations

from checkpoint_report import GOALS, fmt_bytes, table
from checkpoint_settings import CONFIGS, Bench


def goal_text(row: str) -> str:
    """The goal of a summary row, as the table states it."""
    if row.startswith("P1"):
        return f"<= {GOALS['P1_floor']}x append floor per boundary"
    if row.startswith("P2"):
        return f"<= {GOALS['P2_floor']}x append floor per turn; <= 1/3 of LangGraph (2 steps)"
    return {
        "P3 logical bytes": f"<= {fmt_bytes(GOALS['P3_bytes'])} (wchar) at 1000 turns",
        "P3 growth exponent": f"<= {GOALS['P3_exponent']}",
        "P3 disk bytes": f"<= {GOALS['P3_disk_floor']}x the append floor's (write_bytes)",
        "P4 drift": f"<= {GOALS['P4']}x",
        "P5 restore": f"<= {GOALS['P5'] * 1e3:.0f} ms after import; <= LangGraph",
    }.get(row, "")


def run(bench: Bench) -> None:
    """Print the summary table and the bench bugs of this run."""
    summary = bench.shared.summary
    if not summary:
        return
    configs = list(CONFIGS)
    rows = [[row, goal_text(row), *[summary[row].get(c, "-") for c in configs]] for row in summary]
    mode = "" if bench.shared.durable else " (journal durable=False: journal-first not landed)"
    print(f"\n## Summary: P1-P5, four configurations, one run{mode}\n")
    print(table(["figure", "goal", *CONFIGS.values()], rows))
    bench.results["summary"] = summary
    bench.results["bench_bugs"] = bench.shared.bugs
    if bench.shared.bugs:
        print("\nBENCH BUGS (ratios below 1.0 against a floor: measurement errors, not results):")
        for bug in bench.shared.bugs:
            print(f"- {bug}")
    else:
        print("\nno ratio below 1.0 against a floor in this run")

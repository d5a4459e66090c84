"""The text timeline's legend wraps between its entries, never inside one, at any width."""

from __future__ import annotations

import pytest
from test_timeline_model import in_flight_snapshot
from test_timeline_render import text_at

from oma_actors.timeline import build_timeline
from oma_actors.timeline.render_text import MARK_STYLE


@pytest.mark.parametrize("width", [60, 80, 100, 120, 200])
def test_each_legend_entry_stays_on_one_line(width: int) -> None:
    lines = text_at(width, build_timeline(in_flight_snapshot(decided=False))).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("marks: "))
    legend = lines[start:]
    assert all(len(line) <= width for line in legend)
    for mark, (symbol, _) in MARK_STYLE.items():
        assert sum(f"{symbol} {mark}" in line for line in legend) == 1, (mark, legend)
    # Every entry is in the legend once: nothing else landed on its lines.
    shown = " ".join(legend).replace("marks: ", "").split()
    assert " ".join(shown) == " ".join(f"{s} {m}" for m, (s, _) in MARK_STYLE.items())

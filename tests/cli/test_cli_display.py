"""The CLI's tables cut long cells with rich's overflow (an ellipsis), not by slicing by hand."""

from __future__ import annotations

import io

from rich.console import Console

from oma_actors import TaskState
from oma_actors.checkpoint import CheckpointSnapshot
from oma_actors.cli.display import show_snapshot


def test_a_long_result_and_id_are_cut_with_an_ellipsis_on_one_line() -> None:
    task = TaskState(id="0123456789abcdef", title="Write", description="d", status="completed",
                     assignee="writer", result="word " * 100)  # fmt: skip
    snapshot = CheckpointSnapshot(version=4, mode="runTasks", run_id="r1", attempt=1,
                                  revision=1, created_at="now", tasks=(task,))  # fmt: skip
    out = io.StringIO()
    show_snapshot(Console(file=out, width=200, color_system=None), snapshot)
    [row] = [line for line in out.getvalue().splitlines() if "Write" in line]
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[0] == "01234567…"
    assert cells[-1].endswith("…")
    assert cells[-1].startswith("word word")
    assert len(cells[-1]) == 40

"""A crash right after a journal-first suspension snapshot, then restores: never "damaged".

A compaction holds its events back from the journal until its snapshot is durable; a crash
right after the snapshot landed leaves a hole in the journal between what the journal held
(``through``) and the snapshot's watermark, and the restored attempt appends above the
watermark. That hole is covered by the snapshot (JR-22: forward gaps). The check for lost
events (a hole above the watermark) once counted it too: the run, suspended for a review, then
could not be restored after the decision without salvage, which answered the approved call
``TOOL_OUTCOME_UNKNOWN`` instead of running it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash
CHILD = Path(__file__).with_name("approval_gap_child.py")


def child(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(folder), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("journal", ["jsonl", "sqlite"])
def test_a_crash_after_the_suspension_snapshot_restores_after_the_decision(
    tmp_path: Path, journal: str
) -> None:
    crashed = child(tmp_path, "run", journal, "run_suspended:after")
    assert crashed.returncode == CRASH_EXIT, crashed.stderr[-2000:]
    waiting = child(tmp_path, "restore", journal)  # nothing decided: it suspends again
    assert waiting.returncode == 0, waiting.stderr[-2000:]
    assert waiting.stdout.startswith("suspended")
    assert child(tmp_path, "decide", journal).returncode == 0
    done = child(tmp_path, "restore", journal)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok [('a', 'completed'), ('g', 'completed')]"
    assert sorted((tmp_path / "effects.log").read_text().split()) == ["a", "g"]  # each once

"""A conversation opened journal-only while a sibling task writes a snapshot (issue 19, D14).

Journal-first, a task's first request records its prompt in the journal alone, and its first
boundary comes with the model's answer. When a sibling task completes meanwhile, its snapshot's
watermark lies above that prompt, and a fold opens a conversation only from a prompt above the
watermark: the snapshot must hold the conversation itself. It did not, so the task's call and
result, saved journal-only after that snapshot, were skipped on restore and the task started
over, running its recorded call again, ``unsafe`` included, with no warning. Here a real child
process dies right after the call returned, and a fresh process restores.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from opened_child import CRASHED

pytestmark = pytest.mark.crash
CHILD = Path(__file__).with_name("opened_child.py")


def child(folder: Path, phase: str, journal: str, effect: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(folder), phase, journal, effect],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("journal", ["jsonl", "sqlite"])
@pytest.mark.parametrize("effect", ["unsafe", "idempotent"])
def test_a_call_committed_after_a_sibling_snapshot_is_not_run_again(
    tmp_path: Path, journal: str, effect: str
) -> None:
    crashed = child(tmp_path, "run", journal, effect)
    assert crashed.returncode == CRASHED, crashed.stderr[-2000:]
    assert (tmp_path / "effects.log").read_text().split() == ["X@call-1"]
    restored = child(tmp_path, "restore", journal, effect)
    assert restored.returncode == 0, restored.stderr[-2000:]
    assert restored.stdout.split("\n")[0] == "ok [('quick', 'completed'), ('slow', 'completed')]"
    assert (tmp_path / "effects.log").read_text().split() == ["X@call-1"]  # never run again

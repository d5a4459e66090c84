"""A tool's own write to the shared-memory store survives a crash and a journal-first restore.

A tool writes to the team's store itself (no event tells of it); its call is committed, and the
run is saved by the journal alone until a later call kills the process. The restore replays the
committed call (it does not run it again) and puts the store back to the snapshot's view of the
shared memory, which did not hold the tool's write: the key was gone, although the tool's result
said it was stored (journal-first only; OMA's mode saves the memory at every boundary). Now the
boundary after a tool ran compacts when the memory changed, so the snapshot holds the write.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from memory_child import CRASHED

pytestmark = pytest.mark.crash
CHILD = Path(__file__).with_name("memory_child.py")


def child(folder: Path, phase: str, kind: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(folder), phase, kind],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_committed_tool_s_memory_write_survives_the_restore(tmp_path: Path, kind: str) -> None:
    crashed = child(tmp_path, "run", kind)
    assert crashed.returncode == CRASHED, crashed.stderr[-2000:]
    restored = child(tmp_path, "restore", kind)
    assert restored.returncode == 0, restored.stderr[-2000:]
    assert restored.stdout.strip() == "ok ['a/task:t1:result', 'tool/c-remember']"
    # remember ran once (replayed on restore); boom ran again: it never returned.
    assert (tmp_path / "effects.log").read_text().split() == [
        "remember@c-remember", "boom@c-boom", "boom@c-boom",
    ]  # fmt: skip

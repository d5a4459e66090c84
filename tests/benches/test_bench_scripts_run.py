"""The bench scripts still run: each is started as ``make bench`` would, with tiny sizes.

Nothing here times anything (figures belong to ``make bench``); a bench that no longer runs
against the code it measures (``bench/dispatch_marks.py`` read a function a refactor deleted)
fails here instead of on the day someone needs its figures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Script -> the argument lists of its runs, in order ("{tmp}": a fresh folder).
SMALL = {
    "dispatch_marks.py": [["--turns", "2", "--repeats", "1", "--tasks", "2"]],
    "redaction.py": [["--turns", "2", "--repeats", "1"]],
    "history.py": [
        ["--turns", "6", "--repeats", "1"],
        ["--turns", "6", "--repeats", "1", "--store", "sqlite"],
    ],
    "journal_p13.py": [["--runs", "4", "--boundaries", "3", "--repeats", "1", "--only", "jsonl"]],
    "restore_stages.py": [
        ["--capture", "--turns", "6", "--workdir", "{tmp}"],
        ["--repeats", "1", "--workdir", "{tmp}"],
        ["--capture", "--turns", "6", "--workdir", "{tmp}", "--kind", "file"],
        ["--repeats", "1", "--workdir", "{tmp}", "--kind", "file"],
    ],
}


@pytest.mark.parametrize("script", sorted(SMALL))
def test_the_bench_script_runs(script: str, tmp_path: Path) -> None:
    for args in SMALL[script]:
        done = subprocess.run(
            [sys.executable, str(ROOT / "bench" / script)]
            + [arg.replace("{tmp}", str(tmp_path)) for arg in args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=100,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()  # it printed its figures

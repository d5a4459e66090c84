"""``oma verify`` on a journal file that holds several runs: reported per run.

Seqs are numbered per run, so a healthy file of two runs (README's "one file for many runs", a
fork child continuing in its parent's journal) repeats seqs and must verify: exit 0, "ok: 2
runs". A defect of one run fails (exit 1) with a line naming its run and seq.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

from oma_actors.journal import JournalEvent, to_json_line

if TYPE_CHECKING:
    from pathlib import Path


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def line(run: str, seq: int, sources: list[int] | None = None) -> str:
    event = JournalEvent(
        seq=seq, type="turn/start", run_id=run, attempt=1, timestamp_unix_ms=seq,
        source_event_seqs=sources, data={"turn": seq},
    )  # fmt: skip
    return to_json_line(event)


def journal(path: Path, *lines: str) -> str:
    path.write_text("".join(f"{item}\n" for item in lines))
    return str(path)


def test_a_healthy_two_run_journal_verifies_per_run(tmp_path: Path) -> None:
    both = journal(
        tmp_path / "two.jsonl",
        line("A", 1), line("A", 2, [1]), line("A", 3, [2]),
        line("B", 1), line("B", 2, [1]),
    )  # fmt: skip
    text = oma("verify", both)
    assert text.returncode == 0, text.stdout + text.stderr
    assert text.stdout.splitlines()[0] == "ok: 2 runs, 5 events, 0 requests, 0 blocks checked"
    done = oma("verify", both, "--json")
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert (result["ok"], result["failures"], result["runs"]) == (True, [], ["A", "B"])


def test_a_fork_style_journal_verifies(tmp_path: Path) -> None:
    # The child's seqs continue above the fork point (2), over seqs the parent used after it.
    forked = journal(
        tmp_path / "fork.jsonl",
        line("parent", 1), line("parent", 2, [1]), line("parent", 3, [2]), line("parent", 4, [3]),
        line("child", 3), line("child", 4, [3]), line("child", 5, [4]),
    )  # fmt: skip
    done = oma("verify", forked)
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("ok: 2 runs, 7 events")


def test_a_duplicate_seq_within_one_run_fails_naming_the_run_and_seq(tmp_path: Path) -> None:
    bad = journal(
        tmp_path / "bad.jsonl",
        line("A", 1), line("A", 2, [1]),
        line("B", 1), line("B", 2, [1]), line("B", 2, [1]), line("B", 3, [2]),
    )  # fmt: skip
    text = oma("verify", bad)
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[0] == "FAILED: 2 runs, 6 events, 0 requests, 0 blocks checked"
    assert lines[1:] == ["  failure: run B seq 2 SEQ_NOT_MONOTONIC/duplicate-sequence"]
    done = oma("verify", bad, "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["failures"] == [
        {"code": "SEQ_NOT_MONOTONIC", "reason": "duplicate-sequence", "seq": 2, "run_id": "B"}
    ]


def test_a_run_id_from_the_file_never_drives_the_terminal(tmp_path: Path) -> None:
    hostile = "\x1b[2Jr"
    bad = journal(tmp_path / "hostile.jsonl", line(hostile, 1), line(hostile, 1))
    done = oma("verify", bad)
    assert done.returncode == 1
    assert "\x1b" not in done.stdout
    assert "run \\x1b[2Jr seq 1 SEQ_NOT_MONOTONIC/duplicate-sequence" in done.stdout

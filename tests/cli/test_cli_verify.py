"""``oma verify JOURNAL [--json]``: exit 0 ok, 1 failures, 2 unreadable."""

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


def line(seq: int, sources: list[int] | None = None, *, run: str = "r") -> str:
    return to_json_line(
        JournalEvent(
            seq=seq,
            type="turn/start",
            run_id=run,
            attempt=1,
            timestamp_unix_ms=seq,
            source_event_seqs=sources,
            data={"turn": seq},
        )
    )


def test_verify_exit_codes_and_json(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(f"{line(1)}\n{line(2, [1])}\n" + '{"type":"turn/st')  # torn tail: ignored
    done = oma("verify", str(good), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "ok": True, "failures": [], "inconclusive": [],
        "stats": {"events": 2, "requests": 0, "blocks_checked": 0}, "runs": ["r"],
    }  # fmt: skip

    bad = tmp_path / "bad.jsonl"
    bad.write_text(f"{line(1)}\n{line(1)}\n{line(3, [2])}\n")
    failed = oma("verify", str(bad), "--json")
    assert failed.returncode == 1
    result = json.loads(failed.stdout)
    assert [(f["code"], f["reason"], f["seq"]) for f in result["failures"]] == [
        ("SEQ_NOT_MONOTONIC", "duplicate-sequence", 1)
    ]
    gap = {"code": "BROKEN_LINK", "reason": "missing-source", "seq": 3, "missing_seqs": [2]}
    assert result["inconclusive"] == [{**gap, "run_id": "r"}]
    text = oma("verify", str(bad))
    assert text.returncode == 1
    assert "FAILED" in text.stdout
    assert "SEQ_NOT_MONOTONIC/duplicate-sequence" in text.stdout

    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(f"not json\n{line(2)}\n")
    unreadable = oma("verify", str(corrupt))
    assert unreadable.returncode == 2
    assert unreadable.stdout == ""  # errors go to stderr, one line
    assert "line 1" in unreadable.stderr
    assert len(unreadable.stderr.splitlines()) == 1
    absent = oma("verify", str(tmp_path / "absent.jsonl"))
    assert absent.returncode == 2
    assert "no journal file at" in absent.stderr


def test_verify_errors_are_one_plain_line_on_stderr_and_stdout_stays_clean(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(f"not json\n{line(2)}\n")
    for argv in (("verify", str(corrupt), "--json"), ("verify", str(tmp_path / "absent.jsonl"))):
        done = oma(*argv)
        assert done.returncode == 2
        assert done.stdout == ""  # a --json consumer never parses an error
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "[red]" not in done.stderr
        assert "[/]" not in done.stderr


def test_a_journal_of_garbage_alone_is_an_error_not_ok(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("this is not a journal at all")  # one torn-looking line, no event
    for argv in (("verify", str(garbage)), ("verify", str(garbage), "--json")):
        done = oma(*argv)
        assert done.returncode == 2, done.stdout
        assert "ok" not in done.stdout
        assert "no valid event" in done.stderr


# A journal file may hold several runs (README's "one file for many runs", a fork child continuing
# in its parent's journal): seqs are numbered per run, so a healthy file of two runs repeats seqs
# and must verify ("ok: 2 runs"); a defect of one run fails with a line naming its run and seq.


def journal(path: Path, *lines: str) -> str:
    path.write_text("".join(f"{item}\n" for item in lines))
    return str(path)


def test_a_healthy_two_run_journal_verifies_per_run(tmp_path: Path) -> None:
    both = journal(
        tmp_path / "two.jsonl",
        line(1, run="A"), line(2, [1], run="A"), line(3, [2], run="A"),
        line(1, run="B"), line(2, [1], run="B"),
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
        line(1, run="parent"), line(2, [1], run="parent"), line(3, [2], run="parent"), line(4, [3], run="parent"),
        line(3, run="child"), line(4, [3], run="child"), line(5, [4], run="child"),
    )  # fmt: skip
    done = oma("verify", forked)
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("ok: 2 runs, 7 events")


def test_a_duplicate_seq_within_one_run_fails_naming_the_run_and_seq(tmp_path: Path) -> None:
    bad = journal(
        tmp_path / "bad.jsonl",
        line(1, run="A"), line(2, [1], run="A"),
        line(1, run="B"), line(2, [1], run="B"), line(2, [1], run="B"), line(3, [2], run="B"),
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
    bad = journal(tmp_path / "hostile.jsonl", line(1, run=hostile), line(1, run=hostile))
    done = oma("verify", bad)
    assert done.returncode == 1
    assert "\x1b" not in done.stdout
    assert "run \\x1b[2Jr seq 1 SEQ_NOT_MONOTONIC/duplicate-sequence" in done.stdout

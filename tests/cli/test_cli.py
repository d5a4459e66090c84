"""The ``oma`` command line, run as a user would (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def oma(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=cwd,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path.cwd())},
    )


def test_help_documents_every_command() -> None:
    top = oma("--help")
    assert top.returncode == 0
    assert "demo" in top.stdout
    assert "checkpoint" in top.stdout
    assert "--no-crash" in oma("demo", "--help").stdout
    assert "--store" in oma("checkpoint", "show", "--help").stdout


def test_demo_crashes_a_child_and_restores_it(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    run = oma("demo", "--out", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    text = run.stdout
    assert "killed the process" in text
    assert "skipped (completed before the crash, no model call): Survey checkpointing" in text
    assert (
        "replayed (committed result reused, tool not run): search_corpus (call-analyse-0-0)" in text
    )
    assert "re-ran (no commit, same tool_call_id): write_note (call-analyse-0-1)" in text
    assert "attempt 2, status ok" in text
    assert (out / "brief.md").exists()
    state = json.loads((out / "state.json").read_text())
    # The checkpoint, and the journal-first run's history anchors (D17) beside it.
    [entry] = [e for e in state["entries"] if e["key"].startswith("__oma_checkpoint__/")]
    assert all(
        e["key"].startswith("__oma_history__/demo-run/") for e in state["entries"] if e is not entry
    )
    snapshot = json.loads(entry["value"])
    assert snapshot["identity"]["attempt"] == 2
    assert all(task["status"] == "completed" for task in snapshot["queue"]["tasks"])

    shown = oma("checkpoint", "show", "--store", str(out / "state.json"))
    assert shown.returncode == 0, shown.stderr
    assert "demo-run" in shown.stdout
    assert "attempt 2" in shown.stdout
    raw = oma(
        "checkpoint", "show", "--store", str(out / "state.json"), "--run-id", "demo-run", "--raw"
    )
    assert raw.returncode == 0
    # The demo keeps OMA's journal beside its checkpoint, so the snapshot is schema v5.
    assert '"version": 5' in raw.stdout
    assert '"journalWatermarkSeq"' in raw.stdout


def test_approval_demo_suspends_decides_in_another_process_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "approval"
    run = oma("demo", "--approval", "--out", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "status: suspended" in run.stdout
    assert "decision: approved by editor@example.com" in run.stdout
    assert "run demo-run (attempt 2): ok" in run.stdout
    assert (out / "brief.md").exists()
    listed = oma("approvals", "list", "--store", str(out / "state.json"))
    assert listed.returncode == 0, listed.stdout
    assert "approved" in listed.stdout


@pytest.mark.parametrize("args", [("--run-id", "nope")])
def test_checkpoint_show_reports_missing_things(tmp_path: Path, args: tuple[str, ...]) -> None:
    missing = oma("checkpoint", "show", "--store", str(tmp_path / "absent.json"))
    assert missing.returncode == 2
    assert "no store file" in missing.stderr
    assert missing.stdout == ""
    (tmp_path / "state.json").write_text('{"version":1,"entries":[]}')
    none = oma("checkpoint", "show", "--store", str(tmp_path / "state.json"), *args)
    assert none.returncode == 2  # an error (nothing to show), not a finding
    assert "no checkpoint" in none.stderr
    assert len(none.stderr.strip().splitlines()) == 1
    assert none.stdout == ""


def test_corrupt_store_is_a_typed_error_not_an_empty_store(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    run = oma("checkpoint", "show", "--store", str(tmp_path / "state.json"), "--run-id", "x")
    assert run.returncode == 2
    [line] = run.stderr.splitlines()  # one line on stderr, no traceback
    assert "CorruptStoreError" in line
    assert "not valid JSON" in line


def test_checkpoint_show_without_a_run_id_needs_exactly_one_checkpoint(tmp_path: Path) -> None:
    # With two runs in the store, showing "the" checkpoint would pick one at random.
    state = tmp_path / "state.json"
    entries = [
        {
            "key": f"__oma_checkpoint__/{run}/latest",
            "value": "{}",
            "createdAt": "2026-12-05T00:00:00.000Z",
        }
        for run in ("alpha", "beta")
    ]
    state.write_text(json.dumps({"version": 1, "entries": entries}))
    two = oma("checkpoint", "show", "--store", str(state))
    assert two.returncode == 2
    [line] = two.stderr.strip().splitlines()
    assert "2 checkpoints in the store" in line
    assert "__oma_checkpoint__/alpha/latest" in line
    assert "pass --run-id" in line
    state.write_text(json.dumps({"version": 1, "entries": []}))
    none = oma("checkpoint", "show", "--store", str(state))
    assert none.returncode == 2
    assert "0 checkpoints in the store (none); pass --run-id" in none.stderr

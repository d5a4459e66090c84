"""``oma runs show RUN --store URI [--journal PATH] [--html OUT]``: a run's timeline."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "timeline"))
from timeline_runs import restored_demo


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip


def test_runs_show_draws_the_timeline_in_80_columns_and_writes_the_page(tmp_path: Path) -> None:
    asyncio.run(restored_demo(tmp_path))
    store, journal, page = tmp_path / "state.json", tmp_path / "journal.jsonl", tmp_path / "t.html"
    shown = oma("runs", "show", "demo-run", "--store", str(store), "--journal", str(journal),
                "--html", str(page))  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    *timeline, path_line = shown.stdout.splitlines()
    assert max(len(line) for line in timeline) <= 80  # the path is printed whole, to be copied
    assert path_line == f"timeline page: {page}"
    assert "↺ replayed  search_corpus call-analyse-0-0" in shown.stdout
    assert "⟳ re-ran  write_note call-analyse-0-1" in shown.stdout
    assert "from journal + snapshot" in shown.stdout
    html = page.read_text(encoding="utf-8")
    assert 'data-call="call-analyse-0-1"' in html
    assert 'data-mark="re-ran"' in html


def test_runs_show_follows_journal_ref_or_not_and_refuses_missing_things(tmp_path: Path) -> None:
    asyncio.run(restored_demo(tmp_path))
    store = str(tmp_path / "state.json")
    # The demo saves journal-first: like a restore, runs show follows the snapshot's journalRef.
    named = oma("runs", "show", "demo-run", "--store", store)
    assert named.returncode == 0
    assert "from journal + snapshot" in named.stdout
    bare = oma("runs", "show", "demo-run", "--store", store, "--no-journal")
    assert bare.returncode == 0
    assert "snapshot only (no journal)" in bare.stdout
    assert "replayed  search_corpus" not in bare.stdout
    nope = oma("runs", "show", "nope", "--store", store)
    assert nope.returncode == 2
    assert nope.stdout == ""
    assert nope.stderr.strip() == "oma runs: no checkpoint of run nope"
    missing = oma("runs", "show", "demo-run", "--store", store, "--journal", str(tmp_path / "x"))
    assert missing.returncode == 2
    assert "no journal file" in missing.stdout + missing.stderr
    assert oma("runs", "show", "demo-run", "--store", str(tmp_path / "none.json")).returncode == 2

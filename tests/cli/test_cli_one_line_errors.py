"""Bad output paths and missing stores: ONE line on stderr, exit 2, nothing on stdout.

README: "Every ``oma`` error is one line on stderr with exit 2 (stdout, ``--json`` included,
carries results only)". ``runs show --html`` into a missing folder or onto a directory, and
``demo --out`` naming a file, used to end in a traceback with exit 1 (``runs show`` after it
had printed the timeline); ``keys rotate`` printed its missing store on stdout.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "oma"
RUN = "fixture-queue-v2-plan-revisions"


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip


def one_line_failure(done: subprocess.CompletedProcess[str], command: str) -> str:
    """The single stderr line of a failed command (exit 2, empty stdout), without its prefix."""
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"oma {command}: ")
    return lines[0].removeprefix(f"oma {command}: ")


def fixture_store(tmp_path: Path) -> Path:
    """A copy of OMA's queue-v2 fixture store (one run, ``RUN``)."""
    store = tmp_path / "store.json"
    shutil.copy(FIXTURE / "queue-v2-plan-revisions" / "store.json", store)
    os.chmod(store, 0o600)
    return store


def test_runs_show_html_into_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    page = tmp_path / "nodir" / "t.html"
    done = oma("runs", "show", RUN, "--store", str(fixture_store(tmp_path)), "--html", str(page))
    line = one_line_failure(done, "runs")
    assert str(page) in line
    assert f"no directory {page.parent}" in line
    assert not page.parent.exists()


def test_runs_show_html_onto_a_directory_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "pages"
    folder.mkdir()
    done = oma("runs", "show", RUN, "--store", str(fixture_store(tmp_path)), "--html", str(folder))
    assert one_line_failure(done, "runs") == f"--html {folder} is a directory, not a file"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_runs_show_html_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    # The path passes the checks, the write fails (ENOSPC): still one line, and no timeline on
    # stdout (the page is written before the text is printed).
    done = oma("runs", "show", RUN, "--store", str(fixture_store(tmp_path)), "--html", "/dev/full")
    assert one_line_failure(done, "runs").startswith("cannot write --html /dev/full: ")


def test_runs_show_html_still_writes_the_page(tmp_path: Path) -> None:
    page = tmp_path / "t.html"
    done = oma("runs", "show", RUN, "--store", str(fixture_store(tmp_path)), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"timeline page: {page}"
    assert f'data-run="{RUN}"' in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("mode", [(), ("--no-crash",), ("--approval",)])
def test_demo_out_naming_a_file_is_one_line(tmp_path: Path, mode: tuple[str, ...]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    done = oma("demo", *mode, "--out", str(afile))
    assert one_line_failure(done, "demo") == f"--out {afile} is a file, not a directory"
    assert afile.read_text() == "keep me"


def test_demo_out_under_a_file_is_one_line(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    done = oma("demo", "--out", str(afile / "sub"))
    assert one_line_failure(done, "demo").startswith(f"cannot create --out {afile / 'sub'}: ")


def test_keys_rotate_names_a_missing_store_on_stderr(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"k1:{base64.b64encode(bytes(range(32))).decode()}\n")
    os.chmod(keys, 0o600)
    absent = tmp_path / "nonexist.json"
    done = oma("keys", "rotate", "--store", str(absent), "--keys", str(keys))
    assert one_line_failure(done, "keys") == f"no store file at {absent}"
    assert not absent.exists()

"""``oma demo --out DIR`` replaces only its own earlier output, never somebody else's files.

It used to delete ``DIR/state.json`` and ``DIR/journal.jsonl`` unread, even while another
process had that store open: the README's app writes ``state.json`` in the current folder, and
``oma demo --out .`` then lost its runs and pending approvals.
"""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_cli import oma

from oma_actors.stores import FileStore

MODES = [(), ("--approval",), ("--no-crash",)]

# Another process with the store open: FileStore.open holds its lock until stdin closes.
HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from oma_actors.stores import FileStore

    async def main() -> None:
        async with FileStore.open(sys.argv[1]):
            print("held", flush=True)
            await asyncio.to_thread(sys.stdin.read)

    asyncio.run(main())
    """
)


def contents(folder: Path) -> dict[str, str]:
    """Every file of the folder, by name, with the SHA-256 of its bytes."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
    }


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a refused demo (exit 2), without its prefix."""
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("oma demo: ")
    return line.removeprefix("oma demo: ")


def app_store(folder: Path) -> None:
    """The README app's state.json: a run of its own and a pending approval."""

    async def write() -> None:
        async with FileStore.open(folder / "state.json") as store:
            await store.set("__oma_checkpoint__/nightly-1/latest", '{"run": "nightly-1"}')
            await store.set("__oma_approval__/apr_1", "{}", {"runId": "nightly-1"})

    asyncio.run(write())


@pytest.mark.parametrize("mode", MODES, ids=["crash", "approval", "no-crash"])
def test_demo_refuses_a_folder_with_an_apps_state_file(tmp_path: Path, mode: tuple[str]) -> None:
    app_store(tmp_path)
    (tmp_path / "brief.md").write_text("my own brief\n")
    before = contents(tmp_path)
    done = oma("demo", *mode, "--out", str(tmp_path))
    assert refusal(done) == (
        f"--out {tmp_path} already holds state.json that oma demo did not write; "
        "it replaces only its own output: choose a new or empty folder"
    )
    assert contents(tmp_path) == before  # not a byte changed, nothing added


def test_demo_refuses_notes_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "brief.md").write_text("my own brief\n")
    before = contents(tmp_path)
    assert "already holds brief.md that oma demo did not write" in refusal(
        oma("demo", "--out", str(tmp_path))
    )
    assert contents(tmp_path) == before


def test_demo_refuses_an_app_run_added_to_its_own_folder(tmp_path: Path) -> None:
    # The folder is the demo's (its marker is there), but an app wrote its run into state.json.
    assert oma("demo", "--no-crash", "--out", str(tmp_path)).returncode == 0
    app_store(tmp_path)
    before = contents(tmp_path)
    assert "already holds state.json that oma demo did not write" in refusal(
        oma("demo", "--out", str(tmp_path))
    )
    assert contents(tmp_path) == before


@pytest.mark.parametrize("mode", MODES, ids=["crash", "approval", "no-crash"])
def test_demo_leaves_a_store_another_process_holds(tmp_path: Path, mode: tuple[str]) -> None:
    # The demo's own earlier output, held open by another process: it is not pulled away.
    assert oma("demo", "--out", str(tmp_path)).returncode == 0
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "state.json")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path.cwd(),
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        before = contents(tmp_path)  # the holder's pid is in state.json.lock now
        line = refusal(oma("demo", *mode, "--out", str(tmp_path)))
    finally:
        holder.communicate(timeout=30)
    assert line.startswith(f"--out {tmp_path}: ")
    assert f"state.json is in use by another process (pid {holder.pid})" in line
    assert line.endswith("oma demo leaves it alone: stop that process or choose another folder")
    assert contents(tmp_path) == before


def test_demo_runs_again_into_its_own_folder(tmp_path: Path) -> None:
    for _ in range(2):
        done = oma("demo", "--out", str(tmp_path))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "attempt 2, status ok" in done.stdout
    assert (tmp_path / ".oma-demo").is_file()


def test_demo_takes_back_its_output_from_before_the_marker(tmp_path: Path) -> None:
    # A folder a demo filled before it wrote its marker: state.json holds the demo run only.
    assert oma("demo", "--out", str(tmp_path)).returncode == 0
    (tmp_path / ".oma-demo").unlink()
    done = oma("demo", "--approval", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / ".oma-demo").is_file()


def test_demo_refuses_a_journal_with_another_run(tmp_path: Path) -> None:
    assert oma("demo", "--out", str(tmp_path)).returncode == 0
    with (tmp_path / "journal.jsonl").open("a") as journal:
        journal.write('{"type":"run/start","seq":1,"runId":"nightly-1","attempt":1}\n')
    before = contents(tmp_path)
    assert "already holds journal.jsonl that oma demo did not write" in refusal(
        oma("demo", "--out", str(tmp_path))
    )
    assert contents(tmp_path) == before

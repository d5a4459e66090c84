"""``oma approvals decide`` beside a live app that uses the README's ``FileStore("state.json")``.

The app runs in a real child process. A decision must never be erased by the app's next write:
either the app holds the file (it wrote) and the decision is refused with exit 2, or the app
only read it, and its next write reads the file again first and keeps the decision.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from test_cli import oma
from test_cli_stores import seed

from oma_actors.stores import FileStore

if TYPE_CHECKING:
    from oma_actors.approvals import ApprovalRequest

# The app: FileStore(path) built directly; on each stdin line "read" or "write", it lists or
# writes a checkpoint-like key, then answers "done".
APP = textwrap.dedent(
    """
    import asyncio, sys
    from oma_actors.stores import FileStore

    async def main() -> None:
        store = FileStore(sys.argv[1])
        for n, line in enumerate(sys.stdin):
            if line.strip() == "write":
                await store.set(f"__oma_checkpoint__/app/{n}", "snapshot")
            else:
                await store.list()
            print("done", flush=True)

    asyncio.run(main())
    """
)


def start_app(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", APP, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path.cwd(),
    )  # fmt: skip


def tell(app: subprocess.Popen[str], command: str) -> None:
    assert app.stdin is not None
    assert app.stdout is not None
    app.stdin.write(command + "\n")
    app.stdin.flush()
    assert app.stdout.readline().strip() == "done"


def seeded(path: Path) -> ApprovalRequest:
    async def run() -> ApprovalRequest:
        store = FileStore(path)
        try:
            pending, _ = await seed(store)
        finally:
            await store.aclose()
        return pending

    return asyncio.run(run())


def decide(
    path: Path, request: ApprovalRequest, verdict: str, reviewer: str
) -> subprocess.CompletedProcess[str]:
    return oma(
        "approvals", "decide", request.id, "--store", str(path), f"--{verdict}",
        "--reviewer", reviewer, "--hash", request.request_hash,
    )  # fmt: skip


def decision_on_disk(path: Path, request: ApprovalRequest) -> str | None:
    entries = json.loads(path.read_text())["entries"]
    [row] = [e for e in entries if e["key"] == f"__oma_approval__/{request.id}"]
    decided = json.loads(row["value"]).get("decision")
    return None if decided is None else f"{decided['decision']} by {decided['reviewer']['id']}"


def test_decide_beside_an_app_that_wrote_is_refused_and_nothing_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    pending = seeded(path)
    app = start_app(path)
    try:
        tell(app, "write")  # the app's FileStore(path) now holds the file
        refused = decide(path, pending, "reject", "alice")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stdout == ""
        assert f"in use by another process (pid {app.pid})" in refused.stderr
        tell(app, "write")
    finally:
        app.communicate(timeout=30)  # closes stdin (the app exits) and its stdout
    assert decision_on_disk(path, pending) is None  # never "rejected by alice", then erased
    done = decide(path, pending, "reject", "alice")
    assert done.returncode == 0, done.stderr
    assert "rejected by alice" in done.stdout


def test_an_app_that_only_read_keeps_the_decision_made_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    pending = seeded(path)
    app = start_app(path)
    try:
        tell(app, "read")  # loaded, holds no lock: a reviewer may decide now
        done = decide(path, pending, "reject", "alice")
        assert done.returncode == 0, done.stdout + done.stderr
        tell(app, "write")  # locks, reads the file again, then writes
    finally:
        app.communicate(timeout=30)  # closes stdin (the app exits) and its stdout
    assert decision_on_disk(path, pending) == "rejected by alice"
    keys = [e["key"] for e in json.loads(path.read_text())["entries"]]
    assert "__oma_checkpoint__/app/1" in keys


def test_a_second_reviewer_of_a_decided_request_is_refused_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    pending = seeded(path)
    assert decide(path, pending, "reject", "alice").returncode == 0
    second = decide(path, pending, "approve", "bob")
    assert second.returncode == 2
    assert second.stdout == ""
    [line] = second.stderr.strip().splitlines()
    assert "already decided: rejected by alice" in line
    assert decision_on_disk(path, pending) == "rejected by alice"

"""``--store URI`` on every command: open_store spellings, one-line errors, the state-file lock.

A ``decide`` on a state file that another live process holds is refused (DESIGN D13), proved
with a real second process holding the file; the read-only commands keep working beside it.
"""

from __future__ import annotations

import asyncio
import io
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from rich.console import Console
from test_cli import oma

from oma_actors import open_store
from oma_actors.approvals import (
    DurableApprovalLedger,
    Reviewer,
    create_approval_request,
    get_approval_record,
    plan_content,
    tool_call_content,
)
from oma_actors.checkpoint import list_checkpoints
from oma_actors.cli import approvals_cmd
from oma_actors.cli.failure import CommandFailed
from oma_actors.cli.main import build_parser, main
from oma_actors.stores import FileStore

if TYPE_CHECKING:
    from collections.abc import Iterator

    from oma_actors.approvals import ApprovalRequest
    from oma_actors.stores import AtomicStore

HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from oma_actors.stores import FileStore

    async def hold() -> None:
        async with FileStore.open(sys.argv[1]):
            print("holding", flush=True)
            await asyncio.sleep(120)

    asyncio.run(hold())
    """
)


def request(run_id: str = "run-1", call: str = "call-1") -> ApprovalRequest:
    content = tool_call_content(
        tool_name="charge", raw_input={"cents": 500}, input={"cents": 500},
        agent_name="worker", task_id="t1", tool_call_id=call,
    )  # fmt: skip
    return create_approval_request(
        run_id=run_id, scope="tool_call", boundary=f"t1:{call}", content=content, reason="spend"
    )


async def seed(store: AtomicStore) -> tuple[ApprovalRequest, ApprovalRequest]:
    """A pending request and a rejected one, with long ids, names and reviewers."""
    ledger = DurableApprovalLedger(store)
    pending = request("nightly-" + "x" * 60)
    decided = request("run-2", "call-" + "y" * 40)
    for item in (pending, decided):
        await ledger.ensure_request(item)
    reviewer = Reviewer("auditor@example.com", "The Auditor of Very Long Display Names")
    await ledger.decide(
        request_id=decided.id, request_hash=decided.request_hash, decision="reject",
        reviewer=reviewer,
    )  # fmt: skip
    return pending, decided


async def run_approvals(*argv: str, width: int = 200) -> tuple[int, str]:
    parser = build_parser([])
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True)
    return await approvals_cmd.run(
        parser.parse_args(["approvals", *argv]), console
    ), buffer.getvalue()


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A second process that holds ``tmp_path/state.json`` open through ``FileStore.open``."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "state.json")],
        stdout=subprocess.PIPE, text=True, cwd=Path.cwd(),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "holding"
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)


@pytest.mark.parametrize(
    "command",
    [("approvals", "list"), ("approvals", "show"), ("approvals", "decide"),
     ("checkpoint", "show"), ("checkpoint", "list")],
)  # fmt: skip
def test_every_store_option_documents_the_uris(
    command: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for spelling in ("a state file path", "file:///", "sqlite:///", "postgresql://", "redis://"):
        assert spelling in text, (command, spelling)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("approvals", "list", "--store", "mysql://h/db"), "unknown store URI scheme 'mysql'"),
        (("checkpoint", "list", "--store", "file://host/x.json"), "must be local"),
        (
            ("checkpoint", "list", "--store", "postgresql://oma:hunter2@127.0.0.1:1/db"),
            "StoreError: postgresql://oma:***@127.0.0.1:1/db",
        ),
    ],
)
def test_a_bad_or_unreachable_store_is_one_line_on_stderr(argv: tuple[str, ...], says: str) -> None:
    done = oma(*argv)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    assert done.stdout == ""


async def test_a_missing_store_is_reported_never_created(tmp_path: Path) -> None:
    for uri in (f"sqlite://{tmp_path}/no/state.db", str(tmp_path / "no" / "state.json")):
        with pytest.raises(CommandFailed, match="no store file at"):
            await run_approvals("list", "--store", uri)
        assert not (tmp_path / "no").exists()


async def test_approvals_list_fits_80_columns_and_keeps_ids_whole(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    async with FileStore.open(path) as store:
        pending, decided = await seed(store)
    code, out = await run_approvals("list", "--store", str(path), width=80)
    assert code == 0
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80, out
    for item in (pending, decided):
        assert any(line.startswith(item.id) for line in lines), out
    words = " ".join(out.split())
    assert "rejected by auditor@example.com (The Auditor of Very Long Display Names)" in words
    assert "2 request(s), 1 pending" in out


async def test_approvals_list_json_is_the_whole_record(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    async with FileStore.open(path) as store:
        pending, decided = await seed(store)
    code, out = await run_approvals("list", "--store", f"file://{path}", "--json", width=40)
    assert code == 0
    listed = {item["id"]: item for item in json.loads(out)}  # not wrapped at 40 columns
    assert listed[pending.id]["status"] == "pending"
    assert listed[pending.id]["decision"] is None
    assert listed[pending.id]["request_hash"] == pending.request_hash
    assert listed[pending.id]["run_id"] == pending.run_id
    assert listed[decided.id]["status"] == "rejected"
    assert listed[decided.id]["decision"]["reviewer"]["id"] == "auditor@example.com"
    code, out = await run_approvals("list", "--store", str(path), "--json", "--pending")
    assert [item["id"] for item in json.loads(out)] == [pending.id]


async def test_decide_through_a_sqlite_uri(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path}/state.db"
    async with open_store(uri) as store:
        pending, _ = await seed(store)
    code, out = await run_approvals(
        "decide", pending.id, "--store", uri, "--approve", "--reviewer", "fin",
        "--hash", pending.request_hash,
    )  # fmt: skip
    assert code == 0, out
    async with open_store(uri) as store:
        record = await get_approval_record(store, pending.id)
    assert record is not None
    assert record.decision is not None
    assert record.decision.decision == "approved"


def test_decide_is_refused_while_another_process_holds_the_state_file(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    path = tmp_path / "state.json"
    pending, _ = asyncio.run(_seed_unlocked(path))
    before = path.read_bytes()
    decide = ("approvals", "decide", pending.id, "--store", str(path), "--approve")
    done = oma(*decide, "--reviewer", "fin", "--hash", pending.request_hash)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "running sidecar (oma serve)" in line
    assert "decide through that process" in line
    assert f"in use by another process (pid {holder.pid})" in line
    assert path.read_bytes() == before  # nothing was written behind the holder's back
    # Reading needs no lock: list and show work beside the holder.
    listed = oma("approvals", "list", "--store", str(path), "--pending")
    assert listed.returncode == 0, listed.stderr
    assert pending.id in listed.stdout
    assert oma("approvals", "show", pending.id, "--store", str(path)).returncode == 0
    holder.send_signal(signal.SIGTERM)
    holder.communicate(timeout=10)
    done = oma(*decide, "--reviewer", "fin", "--hash", pending.request_hash)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "approved by fin" in done.stdout


async def _seed_unlocked(path: Path) -> tuple[ApprovalRequest, ApprovalRequest]:
    # The holder has the lock (and any FileStore write would be refused): seed a copy
    # elsewhere and put its bytes in place behind the holder, as an earlier run would have.
    scratch = path.with_name("seed.json")
    store = FileStore(scratch)
    try:
        seeded = await seed(store)
    finally:
        await store.aclose()
    await asyncio.to_thread(path.write_bytes, await asyncio.to_thread(scratch.read_bytes))
    return seeded


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The state file of one ``oma demo --no-crash`` run (one completed checkpoint)."""
    out = tmp_path_factory.mktemp("demo")
    done = oma("demo", "--no-crash", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return out / "state.json"


async def test_checkpoint_list_on_file_and_sqlite_stores(demo_store: Path, tmp_path: Path) -> None:
    done = oma("checkpoint", "list", "--store", str(demo_store))
    assert done.returncode == 0, done.stderr
    assert "demo-run" in done.stdout
    assert "completed" in done.stdout
    # The same entries in SQLite, plus a value that does not decode: listed, never skipped.
    async with FileStore.open(demo_store) as source:
        entries = await source.list()
    sqlite = f"sqlite://{tmp_path}/copy.db"
    async with open_store(sqlite) as store:
        for entry in entries:
            await store.set(entry.key, entry.value)
        await store.set("__oma_checkpoint__/broken/latest", "{not json")
        expected = await list_checkpoints(store)
    done = oma("checkpoint", "list", "--store", sqlite, "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [(item["run_id"], item["status"]) for item in listed] == [
        ("demo-run", "completed"),
        ("", "unreadable"),
    ]
    assert [item["key"] for item in listed] == [summary.key for summary in expected]
    readable = oma("checkpoint", "list", "--store", sqlite)
    assert "unreadable __oma_checkpoint__/broken/latest" in readable.stdout
    shown = oma("checkpoint", "show", "--store", sqlite, "--run-id", "demo-run")
    assert shown.returncode == 0, shown.stderr
    assert "attempt 1" in shown.stdout


def test_checkpoint_list_of_an_empty_memory_store() -> None:
    done = oma("checkpoint", "list", "--store", "memory://")
    assert (done.returncode, done.stdout.strip()) == (0, "no checkpoints in the store")


async def test_approvals_refusals_name_the_problem_and_change_nothing(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path}/state.db"
    async with open_store(uri) as store:
        pending, _ = await seed(store)
    for bad in ("abc", pending.request_hash.upper(), pending.request_hash + "0"):
        with pytest.raises(CommandFailed, match="--hash must be the 64 lowercase hex digits"):
            await run_approvals(
                "decide", pending.id, "--store", uri, "--approve", "--reviewer", "fin",
                "--hash", bad,
            )  # fmt: skip
    with pytest.raises(CommandFailed, match="APPROVAL_NOT_FOUND: approval apr_x was not found"):
        await run_approvals("show", "apr_x", "--store", uri)
    async with open_store(uri) as store:
        record = await get_approval_record(store, pending.id)
    assert record is not None
    assert record.decision is None


async def test_approvals_list_of_an_empty_store_says_so(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path}/state.db"
    async with open_store(uri) as store:
        await seed(store)
    code, out = await run_approvals("list", "--store", uri, "--run-id", "no-such-run")
    assert (code, out.strip()) == (0, "no approval requests")


async def test_approvals_show_names_the_tool_of_a_tool_call_only(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path}/state.db"
    plan = create_approval_request(
        run_id="run-3", scope="plan", boundary="plan", content=plan_content([], "execute")
    )
    async with open_store(uri) as store:
        pending, _ = await seed(store)
        await DurableApprovalLedger(store).ensure_request(plan)
    _, shown = await run_approvals("show", pending.id, "--store", uri)
    assert "tool       charge (agent worker)" in shown
    assert "consequential no" in " ".join(shown.split())
    _, shown = await run_approvals("show", plan.id, "--store", uri)
    assert "scope      plan" in shown
    assert "tool " not in shown
    assert "consequential" not in shown


def test_the_live_demo_without_a_key_is_one_line_naming_the_keys(tmp_path: Path) -> None:
    run = oma("demo", "--live", "--out", str(tmp_path / "out"))
    assert run.returncode == 2, run.stdout + run.stderr
    [line] = run.stderr.strip().splitlines()
    assert "--live needs ANTHROPIC_API_KEY or OPENAI_API_KEY" in line

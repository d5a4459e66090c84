"""``oma approvals list|show|decide`` through ``approvals_cmd.run`` with parsed arguments."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
from approval_helpers import dispatch_request, tool_request
from rich.console import Console

from oma_actors.approvals import (
    DurableApprovalLedger,
    approval_hash_input,
    create_approval_request,
    get_approval_record,
    tool_call_content,
)
from oma_actors.cli import approvals_cmd
from oma_actors.cli.failure import CommandFailed
from oma_actors.domain.approvals import Reviewer
from oma_actors.stores import FileStore


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="oma")
    commands = parser.add_subparsers(dest="command", required=True)
    approvals_cmd.add_parser(commands)
    return parser.parse_args(argv)


async def _run(*argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, no_color=True)
    try:
        code = await approvals_cmd.run(_parse("approvals", *argv), console)
    except CommandFailed as exc:  # what ``main`` prints on stderr, with exit 2
        return 2, exc.message
    return code, buffer.getvalue()


@pytest.fixture
async def path(tmp_path: Path) -> Path:
    """A store holding a pending tool request (run-1) and a decided dispatch request (run-2)."""
    path = tmp_path / "state.json"
    async with FileStore.open(path) as store:
        ledger = DurableApprovalLedger(store)
        await ledger.ensure_request(tool_request())
        decided = dispatch_request(run_id="run-2")
        await ledger.ensure_request(decided)
        await ledger.decide(
            request_id=decided.id,
            request_hash=decided.request_hash,
            decision="reject",
            reviewer=Reviewer("auditor", "The Auditor"),
        )
    return path


async def test_list_shows_every_request_with_its_status(path: Path) -> None:
    code, out = await _run("list", "--store", str(path))
    assert code == 0
    assert tool_request().id in out
    assert dispatch_request(run_id="run-2").id in out
    assert "pending" in out
    assert "rejected by auditor (The Auditor)" in out


async def test_list_filters_pending_and_run(path: Path) -> None:
    code, out = await _run("list", "--store", str(path), "--pending")
    assert code == 0
    assert tool_request().id in out
    assert dispatch_request(run_id="run-2").id not in out
    code, out = await _run("list", "--store", str(path), "--run-id", "run-2")
    assert code == 0
    assert tool_request().id not in out
    assert dispatch_request(run_id="run-2").id in out
    code, out = await _run("list", "--store", str(path), "--run-id", "run-9")
    assert (code, out.strip()) == (0, "no approval requests")


async def test_show_prints_the_exact_hashed_text_and_the_hash(path: Path) -> None:
    request = tool_request()
    code, out = await _run("show", request.id, "--store", str(path))
    assert code == 0
    canonical = approval_hash_input(request.scope, request.boundary, request.content)
    assert canonical in out.splitlines()
    assert f"request hash: {request.request_hash}" in out
    assert "Finance review" in out
    assert f"--hash {request.request_hash}" in out


async def test_show_a_decided_request_prints_the_decision(path: Path) -> None:
    code, out = await _run("show", dispatch_request(run_id="run-2").id, "--store", str(path))
    assert code == 0
    assert "rejected by auditor" in out
    assert "to decide" not in out


async def test_show_unknown_id_is_not_found(path: Path) -> None:
    code, out = await _run("show", "apr_" + "0" * 32, "--store", str(path))
    assert code == 2
    assert "APPROVAL_NOT_FOUND" in out


async def test_decide_records_the_decision_durably(path: Path) -> None:
    request = tool_request()
    argv = ("decide", request.id, "--store", str(path), "--approve")
    code, out = await _run(
        *argv, "--reviewer", "finance", "--reviewer-name", "Fin", "--hash", request.request_hash
    )
    assert code == 0, out
    assert "approved by finance (Fin)" in out
    async with FileStore.open(path) as fresh:
        record = await get_approval_record(fresh, request.id)
    assert record is not None
    assert record.decision is not None
    assert record.decision.decision == "approved"
    assert record.decision.reviewer == Reviewer("finance", "Fin")
    # An identical repeat is fine; a different decision is refused.
    code, _ = await _run(*argv, "--reviewer", "finance", "--hash", request.request_hash)
    assert code == 0
    code, out = await _run(
        "decide",
        request.id,
        "--store",
        str(path),
        "--reject",
        "--reviewer",
        "other",
        "--hash",
        request.request_hash,
    )
    assert code == 2  # a refusal is an error, not a finding
    assert "APPROVAL_CONFLICT" in out
    assert "already decided: approved by finance" in out


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("--reviewer", "finance", "--hash", "0" * 64), "APPROVAL_STALE_DECISION"),
        (("--reviewer", "  ", "--hash", tool_request().request_hash), "APPROVAL_VALIDATION_ERROR"),
    ],
)
async def test_decide_refusals_exit_2_with_the_code(
    path: Path, extra: tuple[str, ...], expected: str
) -> None:
    code, out = await _run("decide", tool_request().id, "--store", str(path), "--approve", *extra)
    assert code == 2
    assert expected in out
    async with FileStore.open(path) as fresh:
        record = await get_approval_record(fresh, tool_request().id)
    assert record is not None
    assert record.decision is None


async def test_decide_unknown_id_is_not_found(path: Path) -> None:
    code, out = await _run(
        "decide",
        "apr_" + "0" * 32,
        "--store",
        str(path),
        "--approve",
        "--reviewer",
        "finance",
        "--hash",
        "0" * 64,
    )
    assert code == 2
    assert "APPROVAL_NOT_FOUND" in out


async def test_usage_errors_exit_2(path: Path, tmp_path: Path) -> None:
    code, out = await _run("list", "--store", str(tmp_path / "missing.json"))
    assert code == 2
    assert "no store file" in out
    assert not (tmp_path / "missing.json").exists()
    code, out = await _run(
        "decide",
        tool_request().id,
        "--store",
        str(path),
        "--approve",
        "--reviewer",
        "finance",
        "--hash",
        "ABC",
    )
    assert code == 2
    assert "--hash" in out


@pytest.mark.parametrize(
    "argv",
    [
        ("decide", "apr_x", "--store", "s.json", "--approve", "--reviewer", "a"),  # no --hash
        ("decide", "apr_x", "--store", "s.json", "--reviewer", "a", "--hash", "h"),  # no verdict
        (
            "decide",
            "apr_x",
            "--store",
            "s.json",
            "--approve",
            "--reject",
            "--reviewer",
            "a",
            "--hash",
            "h",
        ),
        ("decide", "apr_x", "--store", "s.json", "--approve", "--hash", "h"),  # no reviewer
        ("show", "--store", "s.json"),  # no id
        ("list",),  # no store
    ],
)
def test_argparse_refuses_incomplete_commands(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        _parse("approvals", *argv)
    assert caught.value.code == 2
    assert "error:" in capsys.readouterr().err


async def test_stored_text_prints_verbatim_never_as_markup_or_emoji(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    request = create_approval_request(
        run_id="run-[red]1",
        scope="tool_call",
        boundary="t1:call-1",
        content=tool_call_content(
            tool_name="say",
            raw_input={"text": "[bold]hi[/] :smile: \u00e9"},
            input={"text": "[bold]hi[/] :smile: \u00e9"},
            agent_name="worker",
            task_id="t1",
            tool_call_id="call-1",
        ),
        reason="[link=x]click[/link] :thumbs_up:",
    )
    async with FileStore.open(path) as store:
        await DurableApprovalLedger(store).ensure_request(request)
    code, out = await _run("show", request.id, "--store", str(path))
    assert code == 0
    assert approval_hash_input(request.scope, request.boundary, request.content) in out
    assert "[link=x]click[/link] :thumbs_up:" in out
    code, out = await _run("list", "--store", str(path))
    assert code == 0
    assert "run-[red]1" in out

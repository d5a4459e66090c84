"""``oma approvals`` shows reviewers whether a tool call is consequential (it is hashed)."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
from approval_helpers import REQUESTED_AT, dispatch_request
from rich.console import Console

from oma_actors.approvals import (
    DurableApprovalLedger,
    approval_hash_input,
    create_approval_request,
    tool_call_boundary,
    tool_call_content,
)
from oma_actors.cli import approvals_cmd
from oma_actors.domain.approvals import ApprovalRequest
from oma_actors.stores import FileStore


def charge(*, consequential: bool, call_id: str) -> ApprovalRequest:
    content = tool_call_content(
        tool_name="charge_card",
        raw_input={"amount": "7"},
        input={"amount": 7},
        agent_name="worker",
        task_id="t1",
        tool_call_id=call_id,
        consequential=consequential,
    )
    return create_approval_request(
        run_id="run-1",
        scope="tool_call",
        boundary=tool_call_boundary("t1", call_id),
        content=content,
        reason="Finance review",
        requested_at=REQUESTED_AT,
    )


CONSEQUENTIAL = charge(consequential=True, call_id="call-1")
BENIGN = charge(consequential=False, call_id="call-2")


async def _run(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="oma")
    approvals_cmd.add_parser(parser.add_subparsers(dest="command", required=True))
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, no_color=True)
    code = await approvals_cmd.run(parser.parse_args(["approvals", *argv]), console)
    return code, buffer.getvalue()


@pytest.fixture
async def path(tmp_path: Path) -> Path:
    path = tmp_path / "state.json"
    async with FileStore.open(path) as store:
        ledger = DurableApprovalLedger(store)
        for request in (CONSEQUENTIAL, BENIGN, dispatch_request()):
            await ledger.ensure_request(request)
    return path


async def test_show_names_the_tool_and_says_it_is_consequential(path: Path) -> None:
    code, out = await _run("show", CONSEQUENTIAL.id, "--store", str(path))
    assert code == 0
    assert "tool       charge_card (agent worker)" in out
    assert "consequential yes: granting it permits real side effects" in out
    hashed = approval_hash_input("tool_call", CONSEQUENTIAL.boundary, CONSEQUENTIAL.content)
    assert '"consequential":true' in hashed
    assert hashed in out  # the flag is in the exact text the reviewer approves


async def test_show_says_no_for_a_benign_tool_and_nothing_for_other_scopes(path: Path) -> None:
    code, out = await _run("show", BENIGN.id, "--store", str(path))
    assert code == 0
    assert "consequential no" in out
    code, out = await _run("show", dispatch_request().id, "--store", str(path))
    assert code == 0
    assert "consequential " not in out.split("content:")[0]


async def test_list_marks_consequential_calls(path: Path) -> None:
    code, out = await _run("list", "--store", str(path), "--json")
    assert code == 0
    flags = {row["id"]: row["consequential"] for row in json.loads(out)}
    assert flags == {CONSEQUENTIAL.id: True, BENIGN.id: False, dispatch_request().id: None}
    code, out = await _run("list", "--store", str(path))
    lines = out.splitlines()
    # Each request lists as its id line, then a details line.
    by_id = {
        line.split()[0]: lines[i + 1] for i, line in enumerate(lines) if line.startswith("apr_")
    }
    assert "CONSEQUENTIAL" in by_id[CONSEQUENTIAL.id]
    assert "CONSEQUENTIAL" not in by_id[BENIGN.id]

"""``oma checkpoint show`` and ``oma approvals show`` print stored text, never obey it (item 7).

Both go through ``terminal_safe`` (the one escaping function); ``checkpoint show`` also escapes
rich markup, because its lines are markup.
"""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path

from rich.console import Console

from oma_actors import TaskState
from oma_actors.approvals import DurableApprovalLedger, create_approval_request, tool_call_content
from oma_actors.checkpoint import CheckpointSnapshot
from oma_actors.cli import approvals_cmd
from oma_actors.cli.display import show_snapshot
from oma_actors.stores import FileStore

EVIL = "\x1b[2J\x1b]0;owned\x07\u202e\x00\x9b[red]markup[/]"
SGR = re.compile("\x1b\\[[0-9;]*m")  # rich's own colours
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=300, force_terminal=True, color_system="truecolor"), out


def test_checkpoint_show_escapes_controls_and_markup_in_stored_text() -> None:
    task = TaskState(id="t1", title=f"title{EVIL}", description="d", status="completed",
                     assignee=f"agent{EVIL}", result=f"result{EVIL}")  # fmt: skip
    snapshot = CheckpointSnapshot(version=4, mode="runTasks", run_id=f"run{EVIL}", attempt=1,
                                  revision=1, created_at="now", tasks=(task,),
                                  goal=f"goal{EVIL}")  # fmt: skip
    console, out = terminal()
    show_snapshot(console, snapshot)
    shown = SGR.sub("", out.getvalue()).replace("\n", "")
    assert not UNSAFE.search(shown)
    assert "goal\\x1b[2J\\x1b]0;owned\\x07\\u202e\\x00\\x9b[red]markup[/]" in shown


async def test_approvals_show_escapes_controls_in_the_reason_and_content(tmp_path: Path) -> None:
    content = tool_call_content(
        tool_name=f"charge{EVIL}", raw_input={"note": EVIL}, input={"note": EVIL},
        agent_name="worker", task_id="t1", tool_call_id="call-1",
    )  # fmt: skip
    request = create_approval_request(run_id="r1", scope="tool_call", boundary="t1:call-1",
                                      content=content, reason=f"reason{EVIL}")  # fmt: skip
    path = tmp_path / "state.json"
    store = FileStore(path)
    await DurableApprovalLedger(store).ensure_request(request)
    await store.aclose()
    parser = argparse.ArgumentParser(prog="oma")
    approvals_cmd.add_parser(parser.add_subparsers(dest="command", required=True))
    console, out = terminal()
    args = parser.parse_args(["approvals", "show", request.id, "--store", str(path)])
    assert await approvals_cmd.run(args, console) == 0
    shown = SGR.sub("", out.getvalue()).replace("\n", "")
    assert not UNSAFE.search(shown)
    assert "reason\\x1b[2J" in shown

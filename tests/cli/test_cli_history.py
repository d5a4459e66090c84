"""``oma runs history|fork|cancel|delete`` and ``runs show --json`` end to end (decision D17)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    JournalOptions,
    OpenMultiAgent,
    Task,
    Team,
    ToolContext,
    define_tool,
    open_store,
)
from oma_actors.journal import SqliteRunJournal, open_journal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter


class Empty(BaseModel):
    pass


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def answer(messages: list[Message], options: ChatOptions) -> LLMResponse:
    turn = sum(1 for m in messages if m.role == "assistant")
    if turn < 2:
        return LLMResponse([ToolUseBlock(f"c{turn}", "echo", {})], stop_reason="tool_use")
    return LLMResponse([TextBlock("done")])


async def journal_first_run(
    root: Path, *, run_id: str = "r1", store_uri: str | None = None, journal_uri: str | None = None
) -> None:
    """A journal-first run: by default a FileStore and a JSONL journal in ``root``."""

    async def echo(args: Empty, ctx: ToolContext) -> str:
        return "ok"

    tool = define_tool(name="echo", description="e", input_model=Empty, execute=echo)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(answer), tools=[tool])])
    journal = open_journal(journal_uri or str(root / "run.jsonl"))
    # Leaving the store gives the file's lock back: the CLI writes it after.
    async with open_store(store_uri or str(root / "state.json")) as store:
        try:
            result = await OpenMultiAgent().run_tasks(
                team, [Task("a", "x", assignee="w", id="t0")],
                checkpoint=CheckpointOptions(store=store, run_id=run_id),
                journal=JournalOptions(journal),
            )  # fmt: skip
        finally:
            await journal.close()
    assert result.success


async def live_record(path: Path, run_id: str) -> None:
    store = FileStore(path)
    ledger = RunLedger(MemoryStoreRunStore(store), lease_ttl=3600)
    await ledger.acquire(run_id, heartbeat=False)  # held: never released
    await store.aclose()  # the file's lock (not the run's lease) goes back to the CLI


def test_history_then_fork_then_show_the_lineage(tmp_path: Path) -> None:
    asyncio.run(journal_first_run(tmp_path))
    store = str(tmp_path / "state.json")
    listed = oma("runs", "history", "r1", "--store", store, "--json")
    assert listed.returncode == 0, listed.stderr
    points = json.loads(listed.stdout)
    assert points[0]["boundary"] == "admission"
    commit = next(p for p in points if p["boundary"] == "tool_commit")
    assert commit["label"] == "t0 turn 1: tool echo committed"
    text = oma("runs", "history", "r1", "--store", store, "--journal", str(tmp_path / "run.jsonl"))
    assert text.returncode == 0, text.stderr
    assert "t0 turn 1: tool echo committed" in text.stdout

    forked = oma("runs", "fork", "r1", "--at", str(commit["seq"]), "--as", "r2", "--store", store)
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.strip() == f"forked r1 at seq {commit['seq']} as r2"
    shown = oma("runs", "show", "r2", "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["forked_from"] == {"run_id": "r1", "seq": commit["seq"]}
    page = tmp_path / "r2.html"
    drawn = oma("runs", "show", "r2", "--store", store, "--html", str(page))
    assert f"forked from run r1 at seq {commit['seq']}" in drawn.stdout
    # The page marks the fork point and names the parent (issue 21 item 5).
    html = page.read_text(encoding="utf-8")
    assert f'data-parent="r1" data-fork-seq="{commit["seq"]}"' in html
    parent = oma("runs", "show", "r1", "--store", store, "--json")
    assert json.loads(parent.stdout)["forked_from"] is None  # the parent is no fork


def test_a_bad_fork_is_one_line_on_stderr_and_exit_2(tmp_path: Path) -> None:
    asyncio.run(journal_first_run(tmp_path))
    store = str(tmp_path / "state.json")
    before = (tmp_path / "state.json").read_bytes()
    bad = oma("runs", "fork", "r1", "--at", "99999", "--as", "r2", "--store", store)
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "nearest points are" in bad.stderr
    assert (tmp_path / "state.json").read_bytes() == before
    unknown = oma("runs", "history", "nope", "--store", store)
    assert unknown.returncode == 2
    assert "'nope' has no history" in unknown.stderr


def test_delete_refuses_a_live_run_and_cancel_then_delete_removes_it(tmp_path: Path) -> None:
    asyncio.run(journal_first_run(tmp_path))
    path = tmp_path / "state.json"
    asyncio.run(live_record(path, "r1"))
    refused = oma("runs", "delete", "r1", "--store", str(path))
    assert refused.returncode == 2
    assert "is live" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "__oma_checkpoint__/r1/latest" in path.read_text()

    cancelled = oma("runs", "cancel", "r1", "--store", str(path))
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith("r1: cancelled")
    deleted = oma("runs", "delete", "r1", "--store", str(path))
    assert deleted.returncode == 0, deleted.stderr
    text = path.read_text()
    assert "__oma_checkpoint__/r1/" not in text
    assert "__oma_history__/r1/" not in text
    assert "__oma_run__/r1" not in text
    # Its journal file held it alone: removed, with its dispatch marks.
    assert f"journal: {tmp_path / 'run.jsonl'} removed" in deleted.stdout
    assert not (tmp_path / "run.jsonl").exists()
    assert not (tmp_path / "run.jsonl.marks").exists()
    again = oma("runs", "delete", "r1", "--store", str(path))
    assert again.returncode == 2
    assert "no run 'r1'" in again.stderr


def test_delete_keeps_a_journal_file_other_runs_share(tmp_path: Path) -> None:
    asyncio.run(journal_first_run(tmp_path, run_id="r1"))
    asyncio.run(journal_first_run(tmp_path, run_id="r2"))
    deleted = oma("runs", "delete", "r1", "--store", str(tmp_path / "state.json"))
    assert deleted.returncode == 0, deleted.stderr
    assert "kept (it holds other runs' events too)" in deleted.stdout
    assert oma("runs", "history", "r2", "--store", str(tmp_path / "state.json")).returncode == 0


def test_delete_keeps_the_history_of_a_run_whose_id_continues_the_deleted_one(
    tmp_path: Path,
) -> None:
    # "r1/x"'s anchors lie under the prefix of "r1": they are "r1/x"'s, not "r1"'s.
    asyncio.run(journal_first_run(tmp_path, run_id="r1/x"))
    asyncio.run(journal_first_run(tmp_path, run_id="r1"))
    store = str(tmp_path / "state.json")
    before = oma("runs", "history", "r1/x", "--store", store)
    assert before.returncode == 0, before.stderr
    deleted = oma("runs", "delete", "r1", "--store", store)
    assert deleted.returncode == 0, deleted.stderr
    after = oma("runs", "history", "r1/x", "--store", store)
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout
    text = (tmp_path / "state.json").read_text()
    assert "__oma_history__/r1/x/" in text
    assert "__oma_checkpoint__/r1/latest" not in text


def test_delete_takes_the_run_s_rows_out_of_its_database_journal(tmp_path: Path) -> None:
    # D15: a SQLite store keeps its runs' journal in its own database; deleting the run leaves
    # none of its events there (a run id used again would show them), the other run's stay.
    uri = f"sqlite:///{tmp_path}/state.db"
    for run in ("r1", "r2"):
        asyncio.run(journal_first_run(tmp_path, run_id=run, store_uri=uri, journal_uri=uri))

    async def events(run_id: str) -> int:
        journal = SqliteRunJournal(str(tmp_path / "state.db"))
        try:
            return len(await journal.read_run(run_id))
        finally:
            await journal.close()

    before = asyncio.run(events("r1"))
    assert before > 0
    deleted = oma("runs", "delete", "r1", "--store", uri)
    assert deleted.returncode == 0, deleted.stderr
    assert f"journal: {before} event(s)" in deleted.stdout
    assert asyncio.run(events("r1")) == 0
    assert asyncio.run(events("r2")) > 0
    assert oma("runs", "delete", "r1", "--store", uri).returncode == 2  # nothing of it left

    async def cut_short(run_id: str) -> None:  # a delete that took the state but not the journal
        async with open_store(uri) as store:
            for entry in await store.list():
                if run_id in entry.key:
                    await store.delete(entry.key)

    asyncio.run(cut_short("r2"))
    finished = oma("runs", "delete", "r2", "--store", uri)
    assert finished.returncode == 0, finished.stderr
    assert "0 snapshot(s), 0 approval row(s), record: False, journal: " in finished.stdout
    assert asyncio.run(events("r2")) == 0


def test_history_reads_the_journal_uri_it_is_given_and_refuses_one_without_the_run(
    tmp_path: Path,
) -> None:
    # ``--journal URI`` (API.md): a database's URI was taken for a file path, and an empty or
    # wrong journal listed the anchors' points alone, exit 0, as if the run had no others.
    uri = f"sqlite:///{tmp_path}/state.db"
    asyncio.run(journal_first_run(tmp_path, store_uri=uri, journal_uri=uri))
    own = oma("runs", "history", "r1", "--store", uri, "--json")
    assert own.returncode == 0, own.stderr
    given = oma("runs", "history", "r1", "--store", uri, "--journal", uri, "--json")
    assert given.returncode == 0, given.stderr
    assert json.loads(given.stdout) == json.loads(own.stdout)
    assert len(json.loads(own.stdout)) > 2
    missing = oma("runs", "history", "r1", "--store", uri, "--journal", str(tmp_path / "no.jsonl"))
    assert missing.returncode == 2
    assert "holds no event of run 'r1'" in missing.stderr


def test_show_of_a_run_cancelled_while_suspended_says_cancelled(tmp_path: Path) -> None:
    # No attempt ran when the operator cancelled it, so no run/end tells it: the run record
    # does. The timeline read the snapshot alone: "suspended" next to a cancelled record.
    from oma_actors.approvals import Suspend

    async def suspended() -> None:
        async def echo(args: Empty, ctx: ToolContext) -> str:
            return "ok"

        tool = define_tool(name="echo", description="e", input_model=Empty, execute=echo)
        team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(answer), tools=[tool])])
        journal = open_journal(str(tmp_path / "run.jsonl"))
        async with open_store(str(tmp_path / "state.json")) as store:
            try:
                result = await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_tasks(
                    team, [Task("a", "x", assignee="w", id="t0")],
                    checkpoint=CheckpointOptions(store=store, run_id="r1"),
                    journal=JournalOptions(journal),
                )  # fmt: skip
            finally:
                await journal.close()
        assert result.status.code == "suspended"

    asyncio.run(suspended())
    path = tmp_path / "state.json"
    asyncio.run(live_record(path, "r1"))
    assert oma("runs", "cancel", "r1", "--store", str(path)).returncode == 0
    shown = oma("runs", "show", "r1", "--store", str(path), "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["record"]["status"] == "cancelled"
    assert view["status"] == "cancelled"


def test_delete_racing_a_restore_that_took_the_run_refuses_and_deletes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The delete read the record before a restore took the run (its read shows no live lease:
    # the moment an explorer froze the CLI at with SIGSTOP); the record is claimed in one
    # compare-and-set that refuses the live lease, so nothing of the live run is deleted.
    from dataclasses import replace as replaced

    from oma_actors.cli.main import main
    from oma_actors.runs import MemoryStoreRunStore as RunStore

    asyncio.run(journal_first_run(tmp_path))
    path = tmp_path / "state.json"
    asyncio.run(live_record(path, "r1"))
    real_get = RunStore.get
    reads: list[str] = []

    async def read_before_the_restore(self: RunStore, run_id: str) -> Any:
        record = await real_get(self, run_id)
        reads.append(run_id)
        if len(reads) > 1 or record is None:
            return record  # every later read sees the record as it is
        # As it was before the restore's acquire (no lease yet).
        return replaced(record, lease=None, status="queued")

    monkeypatch.setattr(RunStore, "get", read_before_the_restore)
    code = main(["runs", "delete", "r1", "--store", str(path)])
    assert code == 2
    assert "is live" in capsys.readouterr().err
    text = path.read_text()
    assert "__oma_checkpoint__/r1/latest" in text
    assert "__oma_run__/r1" in text
    assert (tmp_path / "run.jsonl").exists()

"""``oma checkpoint show`` folds the run's journal tail, as a restore does (D10).

A durable journal saves the per-turn boundaries, so mid-run the snapshot in the store is an
older compaction point: shown alone it would understate where the run stands.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.cli.tail import database_journal
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter


class Note(BaseModel):
    text: str


def turns(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    n = sum(1 for m in messages if m.role == "assistant")
    if n < 20:
        return LLMResponse(
            [ToolUseBlock(f"c{n}", "note", {"text": "x"})], stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )  # fmt: skip
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


async def oma(*args: str) -> tuple[int, str]:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oma_actors.cli.main", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path.cwd())},
    )  # fmt: skip
    out, _ = await asyncio.wait_for(child.communicate(), 90)
    assert child.returncode is not None
    return child.returncode, out.decode()


def shown_turns(output: str) -> int:
    found = re.search(r"phase \w+, (\d+) turns", output)
    assert found is not None, output
    return int(found[1])


async def test_show_folds_the_tail_and_says_how_many_events(tmp_path: Path) -> None:
    calls = 0
    paused, release = asyncio.Event(), asyncio.Event()

    async def note(args: Note, ctx: ToolContext) -> str:
        nonlocal calls
        calls += 1
        if calls == 13:  # mid-run: the run waits here while the CLI looks at its files
            paused.set()
            await release.wait()
        return "noted " + "y" * 200

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(turns), tools=[tool], max_turns=30)])
    state, path = tmp_path / "state.json", tmp_path / "run.jsonl"
    run = asyncio.ensure_future(
        OpenMultiAgent().run_tasks(
            team, [Task("a", "x", assignee="w", id="a")],
            checkpoint=CheckpointOptions(store=FileStore(state), run_id="tail-1"),
            journal=JournalOptions(JsonlRunJournal(path, flush_interval_ms=0)),
        )
    )  # fmt: skip
    await asyncio.wait_for(paused.wait(), 30)

    code, folded = await oma("checkpoint", "show", "--store", str(state), "--run-id", "tail-1")
    assert code == 0, folded
    found = re.search(r"journal: folded (\d+) events from (\S+) \(seq (\d+)\.\.(\d+)\)", folded)
    assert found is not None, folded
    assert int(found[1]) > 0
    assert found[2] == str(path)  # the journal the snapshot names (journalRef)
    assert shown_turns(folded) == 13  # 13 answers so far, the 13th call in flight

    code, alone = await oma(
        "checkpoint", "show", "--store", str(state), "--run-id", "tail-1", "--no-journal"
    )
    assert code == 0, alone
    assert "journal:" not in alone
    # The stored snapshot alone is an older compaction point (the admission, before the task's
    # conversation: issue 19), or one with fewer turns.
    assert "turns" not in alone or shown_turns(alone) < 13

    code, missing = await oma(
        "checkpoint", "show", "--store", str(state), "--run-id", "tail-1",
        "--journal", str(tmp_path / "nowhere.jsonl"),
    )  # fmt: skip
    assert code == 1
    assert "no file at" in missing

    # A copy of the journal whose last event came twice: a journal-first snapshot's tail holds
    # saved state, so the damage is what a restore would refuse (never "discarded", exit 0).
    lines = path.read_bytes().splitlines(keepends=True)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join([*lines, lines[-1]]))
    code, refused = await oma(
        "checkpoint", "show", "--store", str(state), "--run-id", "tail-1",
        "--journal", str(damaged),
    )  # fmt: skip
    assert code == 1, refused
    assert re.search(r"journal: \S+ is damaged at seq \d+ \(", refused), refused
    assert "a restore refuses it" in " ".join(refused.split())

    release.set()
    result = await asyncio.wait_for(run, 30)
    assert result.success

    # The ended run's snapshot knows the journal held its events through its end: a journal
    # that lost them (emptied; or another run's file named instead) folds "cleanly" to nothing,
    # and a restore refuses it: so does the view (never "folded 0 events", exit 0).
    emptied = tmp_path / "emptied.jsonl"
    emptied.write_bytes(b"")
    for name in ("checkpoint", "runs"):
        args = ("show", "--store", str(state), "--journal", str(emptied))
        args = (
            (*args, "--run-id", "tail-1") if name == "checkpoint" else ("show", "tail-1", *args[1:])
        )
        code, lost = await oma(name, *args)
        said = " ".join(lost.split())
        assert "events were lost" in said, lost
        assert "a restore refuses it" in said
        assert "folded 0 events" not in said
    assert code == 0  # ``runs show`` draws what it has, with the note (as for any damage)
    code, _ = await oma(
        "checkpoint", "show", "--store", str(state), "--run-id", "tail-1",
        "--journal", str(emptied),
    )  # fmt: skip
    assert code == 1


SAME_DB = {"kind": "SqliteRunJournal", "store": "same-database", "table": "oma_kv_journal"}


@pytest.mark.parametrize(
    ("ref", "store_uri", "found"),
    [
        (SAME_DB, "sqlite://{dir}/state.db", True),
        (SAME_DB, None, False),  # read from a file: no database to look in
        ("not an object", "sqlite://{dir}/state.db", False),
        ({**SAME_DB, "store": "elsewhere"}, "sqlite://{dir}/state.db", False),
        ({**SAME_DB, "table": "another_table"}, "sqlite://{dir}/state.db", False),
        ({**SAME_DB, "kind": "PostgresRunJournal"}, "sqlite://{dir}/state.db", False),
    ],
)
async def test_a_database_journal_is_read_only_when_the_snapshot_names_this_one(
    tmp_path: Path, ref: object, store_uri: str | None, found: bool
) -> None:
    # Another table (or database) than the one the snapshot names would fold another run's
    # events, or none, into what ``checkpoint show`` says a restore would see.
    snapshot = SimpleNamespace(raw={"journalRef": ref})
    uri = None if store_uri is None else store_uri.format(dir=tmp_path)
    journal = database_journal(snapshot, uri)  # type: ignore[arg-type]
    assert (journal is not None) is found
    if journal is not None:
        await journal.close()

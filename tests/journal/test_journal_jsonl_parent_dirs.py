"""A ``JsonlRunJournal`` in a directory that does not exist yet, and ``verify_run`` on nothing.

README's example journals to ``runs/journal.jsonl``: a ``FileStore`` creates its missing parent
directories, so the journal must too, or every append fails while the run carries on and its
journal-first snapshots name a file that never exists (a restore then raises
``JournalUnavailableError``).
"""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    ToolContext,
    define_tool,
)
from oma_actors.journal import JournalEvent, JsonlRunJournal, verify_run
from oma_actors.llm import LLMResponse, ScriptedAdapter, ToolUseBlock, text_response
from oma_actors.stores import FileStore
from oma_actors.testing.journal_contract import events

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from oma_actors.llm import ChatOptions, Message


def turn(seq: int) -> JournalEvent:
    return JournalEvent(
        seq=seq, type="turn/start", run_id="r", attempt=1, timestamp_unix_ms=seq,
        source_event_seqs=None, data={"turn": seq},
    )  # fmt: skip


async def test_the_first_append_creates_the_missing_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "nightly" / "journal.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    await journal.append([turn(1), turn(2)])
    assert [e.seq for e in await journal.read_from(0)] == [1, 2]
    await journal.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The same directory policy as FileStore's (os.makedirs' default mode, under the umask).
    store = FileStore(str(tmp_path / "state" / "nested" / "state.json"))
    await store.set("k", "v")
    await store.aclose()
    made = stat.S_IMODE((tmp_path / "runs").stat().st_mode)
    assert made == stat.S_IMODE((tmp_path / "state").stat().st_mode)
    assert made == stat.S_IMODE((tmp_path / "runs" / "nightly").stat().st_mode)


async def test_a_bare_file_name_journals_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    journal = JsonlRunJournal("journal.jsonl", flush_interval_ms=0)
    await journal.append([turn(1)])
    await journal.close()
    assert (tmp_path / "journal.jsonl").is_file()


async def test_reading_a_journal_in_a_missing_directory_creates_nothing(tmp_path: Path) -> None:
    journal = JsonlRunJournal(tmp_path / "nowhere" / "journal.jsonl")
    result = await verify_run(journal)
    await journal.close()
    assert not (tmp_path / "nowhere").exists()
    assert (result.ok, result.stats["events"], result.runs) == (True, 0, [])


async def test_a_missing_or_empty_journal_is_ok_with_zero_events(tmp_path: Path) -> None:
    """JR-21: ``ok`` is "no failures", so nothing is ok; the count tells a caller it was nothing."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b'{"type":"turn/st')  # one torn line reads as no event (D6)
    for path in (tmp_path / "missing.jsonl", empty, torn):
        journal = JsonlRunJournal(path)
        result = await verify_run(journal)
        await journal.close()
        assert result.ok, path
        assert result.stats == {"events": 0, "requests": 0, "blocks_checked": 0}, path
        assert (result.runs, result.failures, result.inconclusive) == ([], [], []), path


class _Query(BaseModel):
    q: str


async def _look(args: _Query, ctx: ToolContext) -> str:
    return "r:" + args.q


def _script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) <= 1:
        return LLMResponse([ToolUseBlock("c", "search", {"q": "x"})], stop_reason="tool_use")
    return text_response("done")


async def test_readmes_journal_example_runs_into_a_new_directory(tmp_path: Path) -> None:
    """The README example as written: ``runs/`` does not exist before the run."""
    tool = define_tool(name="search", description="s", input_model=_Query, execute=_look)
    team = Team("t", [AgentConfig("a", model="x", tools=[tool], adapter=ScriptedAdapter(_script))])
    store = FileStore(str(tmp_path / "state.json"))
    path = tmp_path / "runs" / "journal.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    checkpoint = CheckpointOptions(store=store, run_id="nightly-1")
    result = await OpenMultiAgent().run_tasks(
        team, [Task("T", "do", assignee="a")], checkpoint=checkpoint, journal=journal
    )
    assert result.success
    verified = await verify_run(journal)
    await journal.close()
    # Without the directories every append failed, yet the run ended ok: the file never existed.
    assert (verified.ok, verified.runs) == (True, ["nightly-1"])
    kinds = [e.type for e in await JsonlRunJournal(path).read_from(0)]
    assert {"run/start", "tool/result", "run/end"} <= set(kinds), kinds
    await store.aclose()


async def test_a_new_journal_makes_its_name_durable_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first append creates the file and fsyncs its folder (a journal-first snapshot names
    the file: a crash must not lose its name); a journal reopened later fsyncs no folder."""
    import oma_actors.stores.file_io as file_io

    synced: list[str] = []
    real = file_io._fsync_directory
    monkeypatch.setattr(file_io, "_fsync_directory", lambda d: (synced.append(d), real(d))[1])
    path = tmp_path / "run.jsonl"
    for seq in (1, 2):
        journal = JsonlRunJournal(path, flush_interval_ms=0)
        await journal.append([events("r", [seq])[0]])
        await journal.close()
    assert synced == [str(tmp_path)]
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1, 2]

"""A run killed after a context rewrite resumes with exactly the context the model saw.

The child process runs the step scenario with ``SlidingWindow(2)`` or ``Summarize(30)`` on a
durable JSONL journal (journal-first, D10) and dies (``os._exit``) right after the assistant turn
of the 4th model call is saved; the strategy already rewrote the conversation before that call. The snapshot on disk
predates the rewrite: only the journal's tail (``context/replace`` and the turns after it) holds
it, so the restore has to fold ``context/replace`` (``checkpoint/context_layout.replaced``). The
restored run must send the model the very conversation an uncrashed run sends at that point,
and its journal must pass ``verify_run`` and ``enforce_lineage``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from context_scenario import SUMMARY, script, sent, team

from oma_actors import (
    CheckpointOptions,
    OpenMultiAgent,
    SlidingWindow,
    Summarize,
    Task,
    TokenUsage,
)
from oma_actors.agents.context_rules import SUMMARY_MARK, TRUNCATION_NOTICE
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.events import ProgressEvent
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal, verify_run
from oma_actors.llm import TextBlock
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.testing import ScriptedAdapter
from oma_actors.testing.crash_points import CRASH_EXIT

CHILD = Path(__file__).with_name("context_crash_child.py")
TASKS = [Task("steps", "do the steps", id="a")]


def has_notice(messages: object, kind: str = "window") -> bool:
    return any(
        isinstance(b, TextBlock) and b.text == notice(kind)
        for m in messages  # type: ignore[attr-defined]
        for b in m.content
    )


STRATEGIES = {"window": SlidingWindow(2), "summarize": Summarize(30)}


def notice(kind: str) -> str:
    return TRUNCATION_NOTICE if kind == "window" else f"{SUMMARY_MARK}\n{SUMMARY}"


async def baseline(kind: str = "window") -> tuple[list[str], TokenUsage]:
    adapter = ScriptedAdapter(script)
    result = await OpenMultiAgent().run_tasks(
        team(adapter, STRATEGIES[kind]), TASKS,
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r1"),
        journal=JournalOptions(InMemoryRunJournal(), enforce_lineage=True),
    )  # fmt: skip
    assert result.success
    return sent(adapter), result.token_usage


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
async def test_a_restore_after_a_rewrite_resumes_with_the_rewritten_context(
    tmp_path: Path, kind: str
) -> None:
    store_path, journal_path = tmp_path / "state.json", tmp_path / "run.jsonl"
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), str(store_path), str(journal_path),
        "assistant_tool_turn:after:4@a", kind, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await child.communicate()
    assert child.returncode == CRASH_EXIT, stderr.decode()

    journal = JsonlRunJournal(journal_path, flush_interval_ms=0)
    events = await journal.read_from(0)
    replaces = [e for e in events if e.type == "context/replace"]
    assert replaces, "the strategy never rewrote the conversation before the crash"
    snapshot = await Checkpoint(FileStore(store_path), run_id="r1").load_latest()
    assert snapshot is not None
    # The rewrite is in the tail only: what the restore rebuilds comes from folding it. (The
    # stored snapshot may hold no entry yet: a task's admission is journal-only, issue 19.)
    for entry in snapshot.in_flight:
        assert not has_notice(entry.state.conversation, kind)
        assert replaces[0].seq > (entry.journal_seq or snapshot.journal_watermark_seq or 0)
    assert replaces[0].seq > (snapshot.journal_watermark_seq or 0)

    seen: list[ProgressEvent] = []
    adapter = ScriptedAdapter(script)
    restored = await OpenMultiAgent(on_progress=seen.append).restore(
        team(adapter, STRATEGIES[kind]), TASKS,
        checkpoint=CheckpointOptions(store=FileStore(store_path), run_id="r1"),
        journal=JournalOptions(journal, enforce_lineage=True),
    )  # fmt: skip
    assert restored.success, restored.status
    assert not [e for e in seen if type(e).__name__ == "JournalTailDiscarded"]
    expected, usage = await baseline(kind)
    resumed = sent(adapter)
    # The crash came after the 4th call: the restored run's calls are the baseline's 5th on.
    assert resumed == expected[4:]
    first_turn = next(call for call in adapter.calls if call.options.tools)
    assert has_notice(first_turn.messages, kind)
    # The fold carried the usage too (a summary call's included): the budget continues.
    assert restored.token_usage == usage

    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures
    requests = [e for e in await journal.read_from(0) if e.type == "llm/request"]
    assert all(b["sourceEventSeqs"] for r in requests for b in r.data["blocks"])


@pytest.mark.parametrize("durable", [False, True])
async def test_a_rewrite_survives_a_restore_from_the_snapshot_alone(durable: bool) -> None:
    """Without a crash mid-run: a finished run's journal, re-verified, and the last snapshot's
    entry lineage names the replace for the notice (what a later restore re-attaches)."""
    store, journal = InMemoryStore(), InMemoryRunJournal()
    adapter = ScriptedAdapter(script)
    options = JournalOptions(journal, durable=durable, enforce_lineage=True)
    result = await OpenMultiAgent().run_tasks(
        team(adapter, SlidingWindow(2)), TASKS,
        checkpoint=CheckpointOptions(store=store, run_id="r1"), journal=options,
    )  # fmt: skip
    assert result.success
    assert sent(adapter) == (await baseline())[0]
    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures

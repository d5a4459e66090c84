"""Guard: ``CallCommitted.consumes_approval`` (``agents/loop.py``) and its consumer in
``orchestration/journaling.py`` (``recorder.uncarried``).

A tool call held for a reviewer (``on_tool_call`` answered ``Suspend``) runs after a restore
on the approval and uses it up (AP-34). No OMA event says the run's pending approvals lost
that request, so the commit boundary must compact: were it saved by the journal, a process
dying right after it would restore from the journal with the used-up request still pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
from oma_actors.approvals import Reviewer, Suspend, decide_approval
from oma_actors.checkpoint import Checkpoint, Discarded, RunWriter, fold_tail, read_journal_tail
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter


class Query(BaseModel):
    q: str


def search_once(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) == 1:
        return LLMResponse(
            [TextBlock("searching"), ToolUseBlock("a1", "search", {"q": "a1"})],
            stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )
    return LLMResponse([TextBlock("a done")], usage=TokenUsage(1, 1))


async def test_a_tool_approval_used_up_by_its_commit_is_not_pending_after_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path / "state")
    path = tmp_path / "run.jsonl"
    options = CheckpointOptions(store=store, run_id="r")
    ran: list[str] = []

    async def run_search(args: Query, ctx: ToolContext) -> str:
        ran.append(args.q)
        return f"found {args.q}"

    tool = define_tool(name="search", description="search", input_model=Query, execute=run_search)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(search_once), tools=[tool])])
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    try:
        first = await OpenMultiAgent(on_tool_call=lambda *_: Suspend()).run_tasks(
            team, [Task("a", "a", assignee="w", id="a")], checkpoint=options,
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
    finally:
        await journal.close()
    assert first.status.code == "suspended", first.status
    assert ran == []
    [request] = first.pending_approvals
    assert request.scope == "tool_call"
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=Reviewer("lead"),
    )  # fmt: skip

    # boundary, what a restore from the store + journal would list as pending, the run's
    folded: list[tuple[str, list[str], list[str]]] = []
    events: list[ProgressEvent] = []
    original = RunWriter.save_run

    async def save_then_fold(self: RunWriter, run: RunAtBoundary, **kw: Any) -> Any:
        outcome = await original(self, run, **kw)
        if outcome.durable:  # the process dies now: what would a restore fold to?
            snapshot = await run.build()
            stored = await Checkpoint(store, run_id="r").load_latest()
            assert stored is not None
            watermark = snapshot.journal_watermark_seq or 0
            tail = [e for e in await read_journal_tail(journal, stored) if e.seq <= watermark]
            result = fold_tail(stored, tail, enforce_lineage=False)
            assert not isinstance(result, Discarded), result.reason
            pending = [r.id for r in result.snapshot.pending_approvals]
            held = [r.id for r in snapshot.pending_approvals]
            folded.append((kw.get("boundary", "?"), pending, held))
        return outcome

    monkeypatch.setattr(RunWriter, "save_run", save_then_fold)
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    try:
        restored = await OpenMultiAgent(
            on_tool_call=lambda *_: Suspend(), on_progress=events.append
        ).restore(team, checkpoint=options, journal=JournalOptions(journal, durable=True))
    finally:
        await journal.close()
        await store.aclose()
    assert restored.success, restored.status
    assert restored.pending_approvals == []
    assert ran == ["a1"], "the approved call ran once"
    saved = [e for e in events if isinstance(e, CheckpointSaved)]
    commits = [e.mode for e in saved if e.boundary == "tool_commit"]
    # The commit that used the approval up is a compaction point (a snapshot, not the journal).
    assert commits == ["snapshot"], saved
    assert any(boundary == "tool_commit" for boundary, *_ in folded), folded
    # At every durable save, a restore folds to the pending approvals the run held.
    assert all(pending == held for _, pending, held in folded), folded
    assert folded[-1][1] == [], folded

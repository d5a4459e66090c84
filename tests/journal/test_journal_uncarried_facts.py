"""Journal-first compaction decided from the facts the loop reports (D14), never from states.

A boundary is saved by the journal unless a fact recorded since the last save is one the fold
cannot carry. These runs check the loop's facts that no OMA event says: each must make its
boundary compact, or a restore from the journal would lose it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
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
    TeamRunResult,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import (
    Allow,
    ApprovalRequest,
    Deny,
    Reviewer,
    Suspend,
    decide_approval,
)
from oma_actors.checkpoint import Checkpoint, Discarded, RunWriter, fold_tail, read_journal_tail
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.journal_path import JOURNAL_BOUNDARIES
from oma_actors.domain.tasks import TaskState
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter


class Query(BaseModel):
    q: str


def search(call_id: str, usage: TokenUsage) -> LLMResponse:
    return LLMResponse(
        [TextBlock("searching"), ToolUseBlock(call_id, "search", {"q": call_id})],
        stop_reason="tool_use",
        usage=usage,
    )


async def saves(tmp_path: Path, adapter: ScriptedAdapter, **limits: int) -> list[CheckpointSaved]:
    """The saves of a one-task journal-first run of ``adapter`` (a searching agent)."""

    async def run_search(args: Query, ctx: ToolContext) -> str:
        return f"found {args.q}"

    tool = define_tool(name="search", description="search", input_model=Query, execute=run_search)
    agent = AgentConfig("worker", adapter=adapter, tools=[tool], **limits)  # type: ignore[arg-type]
    events: list[ProgressEvent] = []
    store = FileStore(tmp_path / "state")
    journal = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0)
    try:
        await OpenMultiAgent(on_progress=events.append).run_tasks(
            Team("t", [agent]),
            [Task("find", "find it", assignee="worker", id="find")],
            checkpoint=CheckpointOptions(store=store, run_id="r"),
            journal=JournalOptions(journal, durable=True),
        )
    finally:
        await journal.close()
        await store.aclose()
    return [event for event in events if isinstance(event, CheckpointSaved)]


async def test_a_tool_turn_over_the_budget_compacts(tmp_path: Path) -> None:
    # Turn 2 takes the usage over the budget; its calls still run (OMA), and no event says
    # the budget is spent until the turn ends: the loop's BudgetExceeded fact does.
    script = ScriptedAdapter([search("c1", TokenUsage(1, 1)), search("c2", TokenUsage(3, 3))])
    saved = await saves(tmp_path, script, max_token_budget=5)
    turns = [s.mode for s in saved if s.boundary == "assistant_tool_turn"]
    # The second is the turn over the budget (the first opened the conversation).
    assert len(turns) == 2, saved
    assert turns[1] == "snapshot", saved
    # The calls of the first turn went by the journal: only the budget's turn compacted.
    assert "journal" in [s.mode for s in saved if s.boundary == "tool_commit"], saved


async def test_a_stop_at_max_turns_compacts(tmp_path: Path) -> None:
    # No OMA event says a conversation stopped at its turn limit: TurnLimitReached does.
    def searching(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        return search(f"c{len(messages)}", TokenUsage(1, 1))

    script = ScriptedAdapter(searching)
    saved = await saves(tmp_path, script, max_turns=2)
    terminal = [s.mode for s in saved if s.boundary == "terminal"]
    assert terminal == ["snapshot"], saved
    assert "journal" in [s.mode for s in saved if s.boundary == "tool_results"], saved


async def test_a_task_assigned_but_not_dispatched_compacts(tmp_path: Path) -> None:
    # ``b`` (no assignee) becomes ready when ``c`` completes, is assigned, and the dispatch
    # gate denies it: the assignment is in the run's state, no event says it. ``a`` is still
    # running its tool then; its commit is the next save and must compact.
    denied = asyncio.Event()

    async def hold(args: Query, ctx: ToolContext) -> str:
        await denied.wait()
        return "held"

    def slow(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if len(messages) == 1:
            return search("a1", TokenUsage(1, 1))
        return LLMResponse([TextBlock("a done")], usage=TokenUsage(1, 1))

    def gate(task: TaskState) -> Allow | Deny:
        if task.id == "b":
            denied.set()
            return Deny()
        return Allow()

    tool = define_tool(name="search", description="search", input_model=Query, execute=hold)
    team = Team(
        "t",
        [
            AgentConfig("slow", adapter=ScriptedAdapter(slow), tools=[tool]),
            AgentConfig("quick", adapter=ScriptedAdapter([LLMResponse([TextBlock("c done")])])),
        ],
    )
    tasks = [
        Task("a", "a", assignee="slow", id="a"),
        Task("c", "c", assignee="quick", id="c"),
        Task("b", "b", depends_on=["c"], id="b"),
    ]
    events: list[ProgressEvent] = []
    store = FileStore(tmp_path / "state")
    journal = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0)
    try:
        await OpenMultiAgent(
            on_progress=events.append, on_task_dispatch=gate, max_concurrency=2
        ).run_tasks(
            team,
            tasks,
            checkpoint=CheckpointOptions(store=store, run_id="r"),
            journal=JournalOptions(journal, durable=True),
        )
    finally:
        await journal.close()
        await store.aclose()
    saved = [e for e in events if isinstance(e, CheckpointSaved) and e.task_id == "a"]
    modes = {e.boundary: e.mode for e in saved}
    assert modes["tool_commit"] == "snapshot", saved
    assert modes["tool_results"] == "journal", saved


Folded = list[tuple[str, list[str], list[str]]]
"""Per durable save of a restore: its boundary, the pending approvals a restore from the store
and the journal would fold to, and those the run held."""


@dataclass
class ApprovedRestore:
    """What ``approve_and_restore`` saw: the suspended run, its request, the restore."""

    first: TeamRunResult
    request: ApprovalRequest
    ran_before: list[str]
    restored: TeamRunResult
    ran: list[str]
    folded: Folded
    events: list[ProgressEvent]


async def approve_and_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **gates: Any
) -> ApprovedRestore:
    """A one-task journal-first run that ``gates`` suspend, approved, then restored with the
    same gates; after every durable save of the restore the process is taken as dying there,
    and what a restore from the store and the journal would fold to is recorded (``folded``)."""
    store = FileStore(tmp_path / "state")
    path = tmp_path / "run.jsonl"
    options = CheckpointOptions(store=store, run_id="r")
    ran: list[str] = []

    def search_once(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if len(messages) == 1:
            return search("a1", TokenUsage(1, 1))
        return LLMResponse([TextBlock("a done")], usage=TokenUsage(1, 1))

    async def run_search(args: Query, ctx: ToolContext) -> str:
        ran.append(args.q)
        return f"found {args.q}"

    tool = define_tool(name="search", description="search", input_model=Query, execute=run_search)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(search_once), tools=[tool])])
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    try:
        first = await OpenMultiAgent(**gates).run_tasks(
            team, [Task("a", "a", assignee="w", id="a")], checkpoint=options,
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
    finally:
        await journal.close()
    ran_before = list(ran)
    [request] = first.pending_approvals
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=Reviewer("lead"),
    )  # fmt: skip

    folded: Folded = []
    original = RunWriter.save_run

    async def save_then_fold(self: RunWriter, run: RunAtBoundary, **kw: Any) -> Any:
        outcome = await original(self, run, **kw)
        if outcome.durable:  # the process dies now: what would a restore fold to?
            snapshot = await run.build()  # the run at this boundary (it waits for the save)
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
    events: list[ProgressEvent] = []
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    try:
        restored = await OpenMultiAgent(**gates, on_progress=events.append).restore(
            team, checkpoint=options, journal=JournalOptions(journal, durable=True)
        )
    finally:
        await journal.close()
        await store.aclose()
    return ApprovedRestore(first, request, ran_before, restored, ran, folded, events)


async def test_a_dispatch_approval_used_up_after_a_restore_is_not_offered_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The dispatch of ``a`` waits for a reviewer; the restore dispatches it on the approval
    # and uses the approval up (AP-32). No OMA event says so: the save after the dispatch
    # must compact, or a restore from the journal would list the used-up request as pending.
    seen = await approve_and_restore(tmp_path, monkeypatch, on_task_dispatch=lambda task: Suspend())
    assert seen.first.status.code == "suspended", seen.first.status
    assert seen.restored.success, seen.restored.status
    assert seen.restored.pending_approvals == []
    folded = seen.folded
    # The saves after the dispatch were checked: at each, a restore folds to what the run held.
    assert any(boundary in JOURNAL_BOUNDARIES for boundary, _, _ in folded), folded
    assert all(pending == held for _, pending, held in folded), folded
    assert folded[-1][1] == [], folded


async def test_a_tool_approval_used_up_by_its_commit_is_not_pending_after_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Guard: ``CallCommitted.consumes_approval`` (``agents/loop.py``) and its consumer in
    # ``orchestration/journaling.py`` (``recorder.uncarried``). A tool call held for a
    # reviewer runs after a restore on the approval and uses it up (AP-34). No OMA event says
    # the run's pending approvals lost that request, so the commit boundary must compact: were
    # it saved by the journal, a process dying right after it would restore from the journal
    # with the used-up request still pending.
    seen = await approve_and_restore(tmp_path, monkeypatch, on_tool_call=lambda *_: Suspend())
    assert seen.first.status.code == "suspended", seen.first.status
    assert seen.ran_before == []
    assert seen.request.scope == "tool_call"
    assert seen.restored.success, seen.restored.status
    assert seen.restored.pending_approvals == []
    assert seen.ran == ["a1"], "the approved call ran once"
    saved = [e for e in seen.events if isinstance(e, CheckpointSaved)]
    commits = [e.mode for e in saved if e.boundary == "tool_commit"]
    # The commit that used the approval up is a compaction point (a snapshot, not the journal).
    assert commits == ["snapshot"], saved
    folded = seen.folded
    assert any(boundary == "tool_commit" for boundary, *_ in folded), folded
    # At every durable save, a restore folds to the pending approvals the run held.
    assert all(pending == held for _, pending, held in folded), folded
    assert folded[-1][1] == [], folded

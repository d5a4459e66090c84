"""A decided approval's row: its task, call, reason, request time and edited input.

Once decided, a request leaves the snapshot (only its decision stays), so the row is completed
from the journal's ``approval/request`` and ``approval/decision``; the gated call names its
approval. A fork re-binds its parent's decision to a request of its own, decided at the fork: its
row says the decision is the parent's, and with the parent's events it shows the parent's
request and decision times.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel
from test_timeline_render import text_at

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
from oma_actors.approvals import Reviewer, Suspend, ToolCallRequest, decide_approval
from oma_actors.checkpoint import Checkpoint, fork_run, run_history
from oma_actors.clock import to_iso
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter
from oma_actors.timeline import build_timeline, render_timeline_html


class Note(BaseModel):
    text: str


def team() -> Team:
    async def note(args: Note, ctx: ToolContext) -> str:
        return f"noted {args.text}"

    tool = define_tool(name="note", description="Note.", input_model=Note, execute=note)
    adapter = ScriptedAdapter([
        LLMResponse([ToolUseBlock("call-n", "note", {"text": "model's"})], stop_reason="tool_use",
                    usage=TokenUsage(1, 1)),
        LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1)),
    ])  # fmt: skip
    return Team("t", [AgentConfig("w", adapter=adapter, tools=[tool])])


def gate(call: ToolCallRequest) -> Suspend:
    return Suspend("needs a look")


async def test_a_decided_approval_keeps_its_request_and_edit_in_a_run_and_its_fork(
    tmp_path: Path,
) -> None:
    store = InMemoryStore()
    path = tmp_path / "journal.jsonl"
    workers = team()  # one script: the restore's model call is its second answer

    async def attempt(restore: bool, run_id: str = "r1") -> None:
        journal = JsonlRunJournal(path)
        options = CheckpointOptions(store=store, run_id=run_id)
        orchestrator = OpenMultiAgent(on_tool_call=gate)
        try:
            if restore:
                await orchestrator.restore(workers, checkpoint=options,
                                           journal=JournalOptions(journal, durable=True))  # fmt: skip
            else:
                await orchestrator.run_tasks(workers, [Task("n", "x", id="t-n")], checkpoint=options,
                                             journal=JournalOptions(journal, durable=True))  # fmt: skip
        finally:
            await journal.close()

    await attempt(restore=False)
    suspended = await Checkpoint(store, run_id="r1").load_latest()
    assert suspended is not None
    [request] = suspended.pending_approvals
    decided = await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=Reviewer("ann"), edited_input={"text": "reviewer's"},
    )  # fmt: skip
    assert decided.decision is not None
    await attempt(restore=True)

    snapshot = await Checkpoint(store, run_id="r1").load_latest()
    assert snapshot is not None
    reader = JsonlRunJournal(path)
    events = await reader.read_from(0)
    await reader.close()
    parent = build_timeline(snapshot, events)
    [row] = parent.approvals
    assert (row.request_id, row.task_id, row.tool_call_id, row.reason) == (
        request.id, "t-n", "call-n", "needs a look",
    )  # fmt: skip
    assert row.requested_at == to_iso(request.requested_at)
    assert (row.decision, row.reviewer) == ("approved", "ann")
    assert row.decided_at == to_iso(decided.decision.decided_at)
    assert row.edited_input == {"text": "reviewer's"}
    assert row.inherited_from is None
    [call] = parent.calls
    assert (call.call_id, call.mark, call.result) == ("call-n", "executed", "noted reviewer's")
    assert call.approval_id == request.id

    text = text_at(80, parent)
    assert f"task t-n, call call-n, requested at {row.requested_at}" in text
    assert """edited input: {"text": "reviewer's"}""" in text
    assert "edited input: <code>{&#34;text&#34;: &#34;reviewer&#39;s&#34;}</code>" in (
        render_timeline_html(parent)
    )

    await asyncio.sleep(0.01)  # the fork's re-binding is stamped later than the parent's
    reader = JsonlRunJournal(path)
    try:
        at = (await run_history(store, "r1", journal=reader))[-1].seq
        await fork_run(store, "r1", at_seq=at, new_run_id="child", journal=reader)
    finally:
        await reader.close()
    child = await Checkpoint(store, run_id="child").load_latest()
    assert child is not None
    [mine] = child.approval_decisions
    alone = build_timeline(child, [])
    [row] = alone.approvals
    assert (row.request_id, row.inherited_from) == (mine.request_id, "r1")
    assert row.decided_at == to_iso(mine.decided_at) != to_iso(decided.decision.decided_at)
    # With the parent's events (up to the fork point): the parent's request and decision.
    [row] = build_timeline(child, events).approvals
    assert (row.request_id, row.inherited_from, row.task_id, row.tool_call_id) == (
        mine.request_id, "r1", "t-n", "call-n",
    )  # fmt: skip
    assert row.requested_at == to_iso(request.requested_at)
    assert row.decided_at == to_iso(decided.decision.decided_at)
    assert row.edited_input == {"text": "reviewer's"}

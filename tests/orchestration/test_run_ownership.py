"""Run ownership in the orchestrator (spec RS-12, decision D11): lease first, fenced writes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    LeaseError,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.checkpoint import Checkpoint
from oma_actors.events import CheckpointSaveFailed, LeaseLost, ProgressEvent
from oma_actors.keyspace import checkpoint_key, run_record_key
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.runs import MemoryStoreRunStore, RunLedger, RunStoreOptions
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import Expect, Write
from oma_actors.testing import FakeClock, RecordingStore, ScriptedAdapter


class Note(BaseModel):
    text: str


def answer(text: str) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(1, 1))


def one_tool_then_done(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) == 1:
        return LLMResponse(
            [ToolUseBlock("call-1", "note", {"text": "x"})], stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )  # fmt: skip
    return answer("done")


async def test_a_run_owns_its_record_and_tools_see_the_fencing_token() -> None:
    store = InMemoryStore()
    tokens: list[int | None] = []

    async def note(args: Note, ctx: ToolContext) -> str:
        tokens.append(ctx.fencing_token)
        return args.text

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(one_tool_then_done), tools=[tool])])
    runs = MemoryStoreRunStore(store)
    result = await OpenMultiAgent(run_store=runs).run_tasks(
        team, [Task("a", "x")], checkpoint=CheckpointOptions(store=store, run_id="r1")
    )
    assert result.success
    assert tokens == [1]
    record = await RunLedger(runs).get("r1")
    assert record is not None
    assert (record.status, record.fencing_token, record.lease) == ("completed", 1, None)
    assert record.checkpoint_ref is not None
    snapshot = await Checkpoint(store, run_id="r1").load_latest()
    assert snapshot is not None
    # The record points at the last snapshot: both were written in one atomic batch (D11).
    assert record.checkpoint_ref["savedAt"] == snapshot.created_at


async def test_a_run_held_by_a_live_owner_is_refused_before_any_work() -> None:
    store = InMemoryStore()
    runs = MemoryStoreRunStore(store)
    other = await RunLedger(runs, owner="worker-b").acquire("r1", heartbeat=False)
    adapter = ScriptedAdapter([answer("never")])
    with pytest.raises(LeaseError) as caught:
        await OpenMultiAgent(run_store=runs).run_tasks(
            Team("t", [AgentConfig("w", adapter=adapter)]), [Task("a", "x")],
            checkpoint=CheckpointOptions(store=store, run_id="r1"),
        )  # fmt: skip
    assert caught.value.code == "RUN_LEASE_HELD"
    assert adapter.call_count == 0
    assert await Checkpoint(store, run_id="r1").load_latest() is None
    await other.release()


async def test_a_superseded_owner_writes_nothing_more_and_ends_aborted() -> None:
    store = InMemoryStore()
    runs = MemoryStoreRunStore(store)
    clock = FakeClock(1_000_000.0)
    gate = asyncio.Event()
    effects: list[str] = []

    called = asyncio.Event()

    class Slow:
        async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
            called.set()
            if len(messages) == 1:
                await gate.wait()  # the takeover happens while the model "thinks"
            return one_tool_then_done(messages, options)

    async def note(args: Note, ctx: ToolContext) -> str:
        effects.append(ctx.tool_call_id)
        return args.text

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    team = Team("t", [AgentConfig("w", adapter=Slow(), tools=[tool])])
    events: list[ProgressEvent] = []
    options = RunStoreOptions(
        runs, owner="worker-a", lease_ttl=10.0, heartbeat=False, clock=clock.unix
    )
    first = asyncio.ensure_future(
        OpenMultiAgent(on_progress=events.append, run_store=options).run_tasks(
            team, [Task("a", "x")], checkpoint=CheckpointOptions(store=store, run_id="r1")
        )
    )
    await called.wait()
    before = await store.get("__oma_checkpoint__/r1/latest")
    assert before is not None
    clock.advance(11.0)  # worker-a's lease expired (no heartbeat): worker-b takes over
    taker = await RunLedger(runs, owner="worker-b", lease_ttl=10.0, clock=clock.unix).acquire(
        "r1", heartbeat=False
    )
    assert taker.fencing_token == 2
    gate.set()
    result = await asyncio.wait_for(first, 5)
    assert result.status.code == "aborted"
    assert "RUN_LEASE_LOST" in (result.status.message or "")
    assert effects == []  # the tool turn's save was fenced: the tool never ran
    after = await store.get("__oma_checkpoint__/r1/latest")
    assert after is not None
    assert after.value == before.value  # no write of the old owner landed
    lost = [e for e in events if isinstance(e, LeaseLost)]
    assert len(lost) == 1
    failed = [e for e in events if isinstance(e, CheckpointSaveFailed)]
    assert [f.boundary for f in failed] == ["assistant_tool_turn"]
    record = await RunLedger(runs).get("r1")
    assert record is not None
    assert (record.status, record.lease is not None, record.fencing_token) == ("running", True, 2)
    await taker.release()


async def test_a_completed_run_restores_read_only_under_its_run_store() -> None:
    store = InMemoryStore()
    runs = MemoryStoreRunStore(store)
    options = CheckpointOptions(store=store, run_id="r1")
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter([answer("done")]))])
    await OpenMultiAgent(run_store=runs).run_tasks(team, [Task("a", "x")], checkpoint=options)
    before = await store.get("__oma_checkpoint__/r1/latest")
    again = ScriptedAdapter([answer("never")])
    result = await OpenMultiAgent(run_store=runs).restore(
        Team("t", [AgentConfig("w", adapter=again)]), checkpoint=options
    )
    assert result.success
    assert [t.status for t in result.tasks] == ["completed"]
    assert again.call_count == 0
    assert await store.get("__oma_checkpoint__/r1/latest") == before


async def test_a_suspended_run_records_its_pending_approvals() -> None:
    from oma_actors.approvals import Suspend

    store = InMemoryStore()
    runs = MemoryStoreRunStore(store)
    result = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend(), run_store=runs).run_tasks(
        Team("t", [AgentConfig("w", adapter=ScriptedAdapter([answer("x")]))]), [Task("a", "x")],
        checkpoint=CheckpointOptions(store=store, run_id="r1"),
    )  # fmt: skip
    assert result.status.code == "suspended"
    record = await RunLedger(runs).get("r1")
    assert record is not None
    assert record.status == "suspended"
    assert record.suspension is not None
    assert record.suspension["pendingApprovalIds"] == [r.id for r in result.pending_approvals]


class FenceWatchingStore(RecordingStore):
    """The test kit's recording store, also noting the keys of each batch the run record's
    check fences."""

    def __init__(self) -> None:
        super().__init__(InMemoryStore())
        self.fenced_batches: list[frozenset[str]] = []

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        if any(check.key == run_record_key("r1") for check in checks):
            self.fenced_batches.append(frozenset(write.key for write in writes))
        return await super()._apply(checks, writes)


async def test_a_snapshot_in_the_run_record_s_store_is_written_in_the_fence_s_transaction() -> None:
    store = FenceWatchingStore()
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(lambda m, o: answer("done")))])
    result = await OpenMultiAgent(run_store=MemoryStoreRunStore(store)).run_tasks(
        team, [Task("a", "x")], checkpoint=CheckpointOptions(store=store, run_id="r1")
    )
    assert result.success
    snapshot = checkpoint_key("r1")
    saves = [call for call in store.writes if call.key == snapshot]
    assert saves
    # D11: one transaction checks the record, moves it and writes the snapshot, never a
    # snapshot written beside a record moved apart (the order a record elsewhere needs).
    assert all(call.op == "apply" for call in saves), saves
    fenced = [keys for keys in store.fenced_batches if snapshot in keys]
    assert len(fenced) == len(saves)
    for keys in fenced:
        assert run_record_key("r1") in keys

"""The journal vocabulary across a restore: approvals, ``run/start`` mode restore, lineage (JR-09).

A tool call suspends on a durable approval (``approval/request``), a reviewer approves, and the
restore records ``run/start`` (mode ``restore``) and the reconciled ``approval/decision``. With
``enforce_lineage`` a v5 restore passes: the snapshot's ``conversationLineage`` is re-attached to
the very blocks the runner resumes with. A v4 snapshot has no lineage: the request is refused
before the adapter is called and the task fails for good (no retry).
"""

from __future__ import annotations

from collections.abc import Sequence
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
from oma_actors.agents.context import CustomContext
from oma_actors.approvals import Reviewer, Suspend, decide_approval
from oma_actors.events import ProgressEvent, TaskRetry
from oma_actors.journal import InMemoryRunJournal, JournalEvent, JournalOptions, verify_run
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


class Charge(BaseModel):
    amount: int


def team(adapter: ScriptedAdapter, executions: list[int], effect: str = "idempotent") -> Team:
    async def charge(args: Charge, ctx: ToolContext) -> str:
        executions.append(args.amount)
        return f"charged {args.amount}"

    tool = define_tool(
        name="charge", description="c", input_model=Charge, execute=charge,
        effect=effect,  # type: ignore[arg-type]
    )  # fmt: skip
    return Team("t", [AgentConfig("w", adapter=adapter, tools=[tool])])


def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) == 1:
        call = ToolUseBlock("call-1", "charge", {"amount": 7})
        return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(2, 1))
    return LLMResponse([TextBlock("paid")], usage=TokenUsage(1, 1))


def checkpoint(store: InMemoryStore) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id="r1")


def of_type(events: Sequence[JournalEvent], kind: str) -> list[JournalEvent]:
    return [e for e in events if e.type == kind]


async def suspend_and_approve(
    store: InMemoryStore, journal: JournalOptions | None
) -> tuple[ScriptedAdapter, Any]:
    """Run until the call waits for a reviewer, then approve it in the ledger."""
    adapter = ScriptedAdapter(script)
    first = await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_tasks(
        team(adapter, []), [Task("pay", "pay it", id="a", max_retries=2)],
        checkpoint=checkpoint(store), journal=journal,
    )  # fmt: skip
    assert first.status.code == "suspended"
    [request] = first.pending_approvals
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=Reviewer("finance"),
    )  # fmt: skip
    return adapter, request


@pytest.mark.parametrize("durable", [False, True])
async def test_a_v5_restore_records_the_decision_and_passes_enforce_lineage(
    durable: bool,
) -> None:
    store, journal = InMemoryStore(), InMemoryRunJournal()
    options = JournalOptions(journal, durable=durable, enforce_lineage=True)
    adapter, request = await suspend_and_approve(store, options)
    first = await journal.read_from(0)
    [asked] = of_type(first, "approval/request")
    assert asked.data["request"]["id"] == request.id
    assert (asked.task_id, asked.agent_name) == ("a", "w")
    # The turn closed suspended, before the request was announced; the attempt ended suspended.
    assert [e.data for e in of_type(first, "turn/end")] == [{"turn": 1, "outcome": "suspended"}]
    assert of_type(first, "turn/end")[0].seq < asked.seq
    assert first[-1].type == "run/end"
    assert first[-1].data["status"] == {"code": "suspended"}

    executions: list[int] = []
    restored = await OpenMultiAgent(on_tool_call=lambda call: False).restore(
        team(adapter, executions), checkpoint=checkpoint(store), journal=options
    )
    assert restored.success, restored.status
    assert executions == [7]
    assert adapter.call_count == 2  # one per attempt: the restore's request was not refused
    events = await journal.read_from(0)
    later = events[len(first) :]
    start, decided = later[0], later[1]
    assert (start.type, start.data["mode"], start.attempt) == ("run/start", "restore", 2)
    assert decided.type == "approval/decision"
    assert decided.data["decision"]["requestId"] == request.id
    assert decided.data["decision"]["decision"] == "approved"
    # The tool round closes in the new attempt; the next request names every block's source,
    # the first two in the first attempt's events (re-attached from conversationLineage).
    ends = [e.data for e in of_type(later, "turn/end")]
    assert ends == [{"turn": 1, "outcome": "tool_use"}, {"turn": 2, "outcome": "completed"}]
    [req] = of_type(later, "llm/request")
    prompt = of_type(first, "user/message")[0]
    answer = of_type(first, "assistant/message")[0]
    results = of_type(later, "user/message")[0]
    assert [b["sourceEventSeqs"] for b in req.data["blocks"]] == [
        [prompt.seq],
        [answer.seq],
        [results.seq],
    ]
    assert req.data["turn"] == 2
    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures
    assert verdict.stats["requests"] == 2


async def test_a_v4_restore_with_enforce_lineage_is_refused_before_the_adapter_call() -> None:
    store = InMemoryStore()
    adapter, _ = await suspend_and_approve(store, None)  # no journal: a v4 snapshot
    calls_before = adapter.call_count
    journal = InMemoryRunJournal()
    progress: list[ProgressEvent] = []
    executions: list[int] = []
    restored = await OpenMultiAgent(on_progress=progress.append).restore(
        team(adapter, executions), checkpoint=checkpoint(store),
        journal=JournalOptions(journal, enforce_lineage=True),
    )  # fmt: skip
    assert adapter.call_count == calls_before  # JR-09: refused before the adapter call
    assert executions == [7]  # the approved call itself ran before the next request
    assert not restored.success
    [task] = restored.tasks
    assert task.status == "failed"
    assert "MISSING_CONTEXT_REPLACE" in (task.result or "")
    assert not [e for e in progress if isinstance(e, TaskRetry)]  # terminal despite retries
    events = await journal.read_from(0)
    assert not of_type(events, "llm/request")
    [failed] = [e for e in of_type(events, "task/status") if e.data["status"] == "failed"]
    assert "MISSING_CONTEXT_REPLACE" in failed.data["reason"]


async def test_a_v4_restore_without_enforcement_records_blocks_verify_cannot_trace() -> None:
    store = InMemoryStore()
    adapter, _ = await suspend_and_approve(store, None)
    journal = InMemoryRunJournal()
    restored = await OpenMultiAgent().restore(
        team(adapter, []),
        checkpoint=checkpoint(store),
        journal=JournalOptions(journal, durable=False),
    )
    assert restored.success
    [req] = of_type(await journal.read_from(0), "llm/request")
    lineage = [b["sourceEventSeqs"] for b in req.data["blocks"]]
    assert lineage[:2] == [None, None]  # the prompt and the answer came from the v4 snapshot
    assert lineage[2] is not None
    verdict = await verify_run(journal)
    assert not verdict.ok
    assert [(f.reason, f.message_index) for f in verdict.failures] == [
        ("no-lineage", 0),
        ("no-lineage", 1),
    ]


async def test_an_oma_mode_restore_with_the_journal_that_recorded_the_run() -> None:
    # OMA's mode journals every event and saves the whole snapshot at each boundary: the
    # snapshot (v4, no watermark) holds the run, nothing of the journal is folded onto it, and
    # the approved unsafe call runs once, with the conversation as the snapshot holds it.
    store = InMemoryStore()
    journal = JournalOptions(InMemoryRunJournal(), durable=False)
    adapter, _ = await suspend_and_approve(store, journal)
    assert len(await journal.journal.read_from(0)) > 5  # the run's own events are there
    executions: list[int] = []
    restored = await OpenMultiAgent().restore(
        team(adapter, executions, "unsafe"), checkpoint=checkpoint(store), journal=journal
    )
    assert restored.success
    assert executions == [7]  # the approved call ran once
    assert [m.role for m in adapter.calls[-1].messages] == ["user", "assistant", "user"]


async def test_a_v4_restore_without_enforcement_lets_a_context_strategy_rewrite() -> None:
    # The v4 snapshot's blocks have no lineage; without ``enforce_lineage`` a rewrite keeping
    # them is recorded as it is (``context/replace``), not refused (JR-09 binds only when on).
    store = InMemoryStore()
    adapter, _ = await suspend_and_approve(store, None)
    executions: list[int] = []
    shortened = TextBlock("pay it (shortened)")

    def shorten(messages: list[Message]) -> list[Message]:
        return [Message("user", [shortened]), *messages[1:]]

    base = team(adapter, executions).agents[0]
    agent = AgentConfig(
        base.name, adapter=adapter, tools=list(base.tools), context_strategy=CustomContext(shorten)
    )
    journal = InMemoryRunJournal()
    restored = await OpenMultiAgent().restore(
        Team("t", [agent]), checkpoint=checkpoint(store),
        journal=JournalOptions(journal, durable=False),
    )  # fmt: skip
    assert restored.success, restored.tasks[0].result
    assert executions == [7]
    assert adapter.calls[-1].messages[0].content == [shortened]
    assert of_type(await journal.read_from(0), "context/replace")

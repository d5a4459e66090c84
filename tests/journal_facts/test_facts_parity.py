"""Parity that falls out of one recorder (issue 19 item 6).

A journal given without a checkpoint records the run; ``run/end`` carries OMA's
``status: {code}`` with the run's real outcome and ``error: {message}``; ``assistant/message``
carries the answer's ``stopReason``.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from oma_actors.journal import InMemoryRunJournal, JournalEvent, JournalOptions, verify_run
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


class Note(BaseModel):
    text: str


def one_tool(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """A tool turn, then an answer cut short by the token limit (a stop reason of its own)."""
    if len(messages) == 1:
        return LLMResponse(
            [ToolUseBlock("call-1", "note", {"text": "x"})], stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )  # fmt: skip
    return LLMResponse([TextBlock("done")], stop_reason="max_tokens", usage=TokenUsage(1, 1))


def team(adapter: ScriptedAdapter) -> Team:
    async def note(args: Note, ctx: ToolContext) -> str:
        return f"noted {args.text}"

    tool = define_tool(name="note", description="take a note", input_model=Note, execute=note)
    return Team("t", [AgentConfig("w", adapter=adapter, tools=[tool])])


def kinds(events: Sequence[JournalEvent]) -> list[str]:
    return [e.type for e in events]


async def test_a_journal_without_a_checkpoint_records_the_run() -> None:
    journal = InMemoryRunJournal()
    result = await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(one_tool)),
        [Task("t", "do it", id="a", assignee="w")],
        journal=JournalOptions(journal, durable=False),
    )
    assert result.success
    events = await journal.read_from(0)
    assert kinds(events) == [
        "run/start", "plan/set", "task/status",
        "user/message", "turn/start", "llm/request", "assistant/message",
        "tool/call", "tool/result", "user/message", "turn/end",
        "turn/start", "llm/request", "assistant/message", "turn/end",
        "task/status", "run/end",
    ]  # fmt: skip
    assert events[-1].data == {"status": {"code": "ok"}}
    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures


async def test_a_durable_journal_without_a_checkpoint_holds_nothing_back() -> None:
    # No writer takes a durable journal's events without a checkpoint: all of them land.
    journal = InMemoryRunJournal()
    await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(one_tool)),
        [Task("t", "do it", id="a", assignee="w")],
        journal=JournalOptions(journal, durable=True),
    )
    events = await journal.read_from(0)
    assert kinds(events)[0] == "run/start"
    assert kinds(events)[-1] == "run/end"
    assert "tool/result" in kinds(events)


async def test_a_retried_task_without_a_checkpoint_records_its_new_conversation() -> None:
    calls = 0

    def flaky(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            from oma_actors.errors import LLMError

            raise LLMError("scripted", "overloaded", retryable=True)
        return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))

    journal = InMemoryRunJournal()
    result = await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(flaky)),
        [Task("t", "do it", id="a", assignee="w", max_retries=1, retry_delay_ms=0)],
        journal=JournalOptions(journal, durable=False),
    )
    assert result.success
    events = await journal.read_from(0)
    prompts = [e for e in events if e.type == "user/message"]
    assert len(prompts) == 2  # the retry's prompt too: its conversation starts afresh
    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures


async def test_run_end_carries_the_failed_runs_status_and_message() -> None:
    def broken(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        from oma_actors.errors import LLMError

        raise LLMError("scripted", "down for good", retryable=False)

    journal = InMemoryRunJournal()
    result = await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(broken)),
        [Task("t", "do it", id="a", assignee="w")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r-failed"),
        journal=JournalOptions(journal, durable=False),
    )
    assert not result.success
    [end] = [e for e in await journal.read_from(0) if e.type == "run/end"]
    assert end.data["status"] == {"code": "error"}
    assert end.data["error"] == {"message": result.status.message}
    assert result.status.message


async def test_assistant_message_carries_the_stop_reason() -> None:
    journal = InMemoryRunJournal()
    await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(one_tool)),
        [Task("t", "do it", id="a", assignee="w")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r-stop"),
        journal=JournalOptions(journal, durable=False),
    )
    answers = [e for e in await journal.read_from(0) if e.type == "assistant/message"]
    assert [e.data.get("stopReason") for e in answers] == ["tool_use", "max_tokens"]


async def test_run_agent_answer_carries_the_stop_reason() -> None:
    journal = InMemoryRunJournal()
    adapter = ScriptedAdapter(
        [LLMResponse([TextBlock("hi")], stop_reason="end_turn", usage=TokenUsage(1, 1))]
    )
    await OpenMultiAgent().run_agent(AgentConfig("solo", adapter=adapter), "hello", journal=journal)
    [answer] = [e for e in await journal.read_from(0) if e.type == "assistant/message"]
    assert answer.data["stopReason"] == "end_turn"


async def test_concurrent_tasks_keep_each_answers_stop_reason() -> None:
    # Each task's answer hook notes its own stop reason; other tasks' saves in between (their
    # boundaries observe every task) neither lose it nor give it to another task.
    journal = InMemoryRunJournal()
    adapter = ScriptedAdapter(one_tool, delay=0.01)
    tasks = [Task(f"t{i}", f"do {i}", id=f"t{i}", assignee="w") for i in range(4)]
    result = await OpenMultiAgent(max_concurrency=4).run_tasks(
        team(adapter),
        tasks,
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r-concurrent"),
        journal=JournalOptions(journal, durable=False),
    )
    assert result.success
    events = await journal.read_from(0)
    for task in tasks:
        answers = [e for e in events if e.type == "assistant/message" and e.task_id == task.id]
        assert [e.data.get("stopReason") for e in answers] == ["tool_use", "max_tokens"]


async def test_a_journal_watcher_sees_a_failed_run_end_as_failed() -> None:
    # The sidecar maps run/end as it maps an attempt's result: a run whose task failed is
    # FAILED to a journal=true watcher, no longer COMPLETED (the journal said "ok").
    pytest.importorskip("grpc")
    from sidecar._pb.oma.v1 import sidecar_pb2 as pb
    from sidecar.journal_watch import journal_message

    def broken(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        from oma_actors.errors import LLMError

        raise LLMError("scripted", "down for good", retryable=False)

    journal = InMemoryRunJournal()
    await OpenMultiAgent().run_tasks(
        team(ScriptedAdapter(broken)),
        [Task("t", "do it", id="a", assignee="w")],
        journal=JournalOptions(journal, durable=False),
    )
    [end] = [e for e in await journal.read_from(0) if e.type == "run/end"]
    watched = journal_message(end)
    assert watched.run_status.status == pb.RUN_STATUS_FAILED
    assert watched.run_status.outcome.code == "error"
    assert "failed" in watched.run_status.outcome.message

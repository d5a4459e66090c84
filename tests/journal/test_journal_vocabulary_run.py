"""OMA's journal vocabulary as a run records it (spec 17.2, JR-05..JR-09, JR-19..JR-23).

Small teams on the scripted model, journaled into an ``InMemoryRunJournal``: which event types a
run records, in which order, with which key fields and lineage, and that ``verify_run`` passes
with the ``llm/request`` events present (so its lineage checks run on real requests).
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
from oma_actors.errors import LLMError
from oma_actors.events import ProgressEvent, TaskRetry
from oma_actors.journal import InMemoryRunJournal, JournalEvent, JournalOptions, verify_run
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


class Note(BaseModel):
    text: str


def note_tool(effects: list[str]) -> Any:
    async def note(args: Note, ctx: ToolContext) -> str:
        effects.append(ctx.tool_call_id)
        return f"noted {args.text}"

    return define_tool(name="note", description="n", input_model=Note, execute=note)


def one_tool_then_answer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """A tool turn on the first request, then the final answer."""
    if len(messages) == 1:
        call = ToolUseBlock(f"call-{len(messages)}", "note", {"text": "x"})
        return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(3, 2))
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


def checkpoint(store: object) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id="v1")  # type: ignore[arg-type]


def kinds(events: Sequence[JournalEvent], task: str | None = None) -> list[str]:
    """The event types, without ``checkpoint/saved`` (how many saves is the writer's business)."""
    return [
        e.type
        for e in events
        if e.type != "checkpoint/saved" and (task is None or e.task_id == task)
    ]


def of_type(events: Sequence[JournalEvent], kind: str) -> list[JournalEvent]:
    return [e for e in events if e.type == kind]


ONE_TOOL_TURN = [
    "task/status",  # in_progress
    "user/message",  # the prompt, recorded before the first request
    "turn/start",
    "llm/request",
    "assistant/message",
    "tool/call",
    "tool/result",
    "user/message",  # tool_results
    "turn/end",  # tool_use
    "turn/start",
    "llm/request",
    "assistant/message",
    "turn/end",  # completed
    "task/status",  # completed
]


WITHOUT_REQUESTS = [kind for kind in ONE_TOOL_TURN if kind != "llm/request"]


@pytest.mark.parametrize("durable", [False, True])
async def test_a_fresh_run_records_plan_tasks_turns_requests_and_memory(durable: bool) -> None:
    journal, effects = InMemoryRunJournal(), []
    agent = AgentConfig(
        "w", adapter=ScriptedAdapter(one_tool_then_answer), tools=[note_tool(effects)],
        system_prompt="be brief", model="m-1",
    )  # fmt: skip
    tasks = [
        Task("first", "do a", assignee="w", id="a"),
        Task("second", "do b", assignee="w", id="b", depends_on=["a"]),
    ]
    result = await OpenMultiAgent().run_tasks(
        Team("t", [agent], shared_memory=True), tasks, checkpoint=checkpoint(InMemoryStore()),
        journal=JournalOptions(journal, durable=durable),
    )  # fmt: skip
    assert result.success
    events = await journal.read_from(0)
    assert kinds(events)[:2] == ["run/start", "plan/set"]
    assert kinds(events)[-1] == "run/end"
    plan = of_type(events, "plan/set")[0].data
    assert plan == {
        "revision": 0,
        "source": "initial",
        "tasks": [
            {"taskId": "a", "description": "do a", "assignee": "w"},
            {"taskId": "b", "description": "do b", "assignee": "w", "dependsOn": ["a"]},
        ],
    }
    for task in ("a", "b"):
        assert kinds(events, task) == (ONE_TOOL_TURN if not durable else WITHOUT_REQUESTS)
        statuses = [e.data["status"] for e in of_type(events, "task/status") if e.task_id == task]
        assert statuses == ["in_progress", "completed"]
    # The task's result written to shared memory, before the completion is announced.
    sets = of_type(events, "memory/set")
    assert [(e.data["agent"], e.data["key"], e.data["valueBytes"]) for e in sets] == [
        ("w", "task:a:result", 4),
        ("w", "task:b:result", 4),
    ]
    done = next(e for e in of_type(events, "task/status") if e.data["status"] == "completed")
    assert sets[0].seq < done.seq

    a = [e for e in events if e.task_id == "a"]
    turns = [(e.type, e.data["turn"]) for e in a if e.type in ("turn/start", "turn/end")]
    assert turns == [("turn/start", 1), ("turn/end", 1), ("turn/start", 2), ("turn/end", 2)]
    assert [e.data["outcome"] for e in of_type(a, "turn/end")] == ["tool_use", "completed"]
    if durable:
        # Journal-first leaves OMA's llm/request out (O(conversation) bytes per call).
        assert of_type(events, "llm/request") == []
        assert (await verify_run(journal)).ok
        return
    prompt, results = of_type(a, "user/message")
    first, second = of_type(a, "llm/request")
    answer1, answer2 = of_type(a, "assistant/message")
    call, result_event = of_type(a, "tool/call")[0], of_type(a, "tool/result")[0]
    # JR-07: every event names what it derives from.
    assert answer1.source_event_seqs == [first.seq]
    assert answer2.source_event_seqs == [second.seq]
    assert call.source_event_seqs == [answer1.seq]
    assert result_event.source_event_seqs == [call.seq]
    assert results.source_event_seqs == [result_event.seq]
    assert answer1.data["model"] == "m-1"
    assert (first.data["model"], first.data["turn"]) == ("m-1", 1)
    assert [len(first.data[k]) for k in ("systemPromptHash", "toolsHash")] == [64, 64]
    # Every block of the conversation, each with the event that carried it.
    assert [(b["messageIndex"], b["blockType"], b["sourceEventSeqs"]) for b in first.data[
        "blocks"]] == [(0, "text", [prompt.seq])]  # fmt: skip
    assert [(b["role"], b["blockType"], b["sourceEventSeqs"]) for b in second.data["blocks"]] == [
        ("user", "text", [prompt.seq]),
        ("assistant", "tool_use", [answer1.seq]),
        ("user", "tool_result", [results.seq]),
    ]
    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures
    assert verdict.inconclusive == []
    assert verdict.stats["requests"] == 4
    assert verdict.stats["blocks_checked"] == 2 * (1 + 3)


async def test_a_failed_model_call_closes_its_turn_and_a_failure_cascades() -> None:
    def fail(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        raise LLMError("scripted", "overloaded")

    journal = InMemoryRunJournal()
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(fail))])
    tasks = [Task("first", "x", id="a"), Task("second", "y", id="b", depends_on=["a"])]
    result = await OpenMultiAgent().run_tasks(
        team,
        tasks,
        checkpoint=checkpoint(InMemoryStore()),
        journal=JournalOptions(journal, durable=False),
    )
    assert not result.success
    events = await journal.read_from(0)
    assert kinds(events, "a") == [
        "task/status", "user/message", "turn/start", "llm/request", "turn/end", "task/status",
    ]  # fmt: skip
    # As OMA: turn/end closes the turn its turn/start opened (1), although the failed call
    # counted no turn in the state (a fold skips an error turn/end's number).
    assert [e.data["turn"] for e in of_type(events, "turn/start")] == [1]
    assert of_type(events, "turn/end")[0].data == {"turn": 1, "outcome": "error"}
    # From the queue, so the cascade appears: b never ran, it failed with a.
    statuses = [(e.task_id, e.data) for e in of_type(events, "task/status")]
    assert statuses == [
        ("a", {"status": "in_progress"}),
        ("a", {"status": "failed", "reason": "scripted: overloaded"}),
        ("b", {"status": "failed", "reason": 'Cancelled: dependency "a" failed.'}),
    ]
    assert kinds(events)[-1] == "run/end"
    assert (await verify_run(journal)).ok


async def test_a_retried_attempt_closes_the_failed_turn_and_records_its_new_prompt() -> None:
    calls: list[int] = []

    def flaky(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        calls.append(len(messages))
        if len(calls) == 1:
            error = LLMError("scripted", "try again")
            error.retryable = True
            raise error
        return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))

    journal, progress = InMemoryRunJournal(), list[ProgressEvent]()
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(flaky))])
    result = await OpenMultiAgent(on_progress=progress.append).run_tasks(
        team, [Task("a", "x", id="a", max_retries=1, retry_delay_ms=1)],
        checkpoint=checkpoint(InMemoryStore()), journal=JournalOptions(journal, durable=False),
    )  # fmt: skip
    assert result.success
    assert [type(e) for e in progress if isinstance(e, TaskRetry)] == [TaskRetry]
    events = await journal.read_from(0)
    assert kinds(events, "a") == [
        "task/status",
        "user/message", "turn/start", "llm/request", "turn/end",  # attempt 1: error
        "user/message", "turn/start", "llm/request", "assistant/message", "turn/end",
        "task/status",
    ]  # fmt: skip
    assert [e.data["outcome"] for e in of_type(events, "turn/end")] == ["error", "completed"]
    second_prompt, second_request = of_type(events, "user/message")[1], of_type(
        events, "llm/request"
    )[1]  # fmt: skip
    assert second_request.data["blocks"][0]["sourceEventSeqs"] == [second_prompt.seq]
    assert (await verify_run(journal)).ok


async def test_a_denied_dispatch_records_the_skip_with_its_reason() -> None:
    journal = InMemoryRunJournal()
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(lambda m, o: LLMResponse(
        [TextBlock("ok")])))])  # fmt: skip
    tasks = [Task("a", "x", id="a"), Task("b", "y", id="b", depends_on=["a"])]
    result = await OpenMultiAgent(on_task_dispatch=lambda task: task.id != "b").run_tasks(
        team,
        tasks,
        checkpoint=checkpoint(InMemoryStore()),
        journal=JournalOptions(journal, durable=False),
    )
    assert result.status.code == "rejected"
    events = await journal.read_from(0)
    skipped = [e for e in of_type(events, "task/status") if e.data["status"] == "skipped"]
    assert [(e.task_id, e.data["reason"]) for e in skipped] == [
        ("b", "Skipped: task dispatch approval rejected.")
    ]


async def test_concurrent_tasks_each_record_their_prompt_once() -> None:
    # A task's first request records its prompt before the run holds any state of it; saves
    # of the other tasks in between must not make the journal forget (and re-record) it.
    journal, effects = InMemoryRunJournal(), []
    agent = AgentConfig(
        "w", adapter=ScriptedAdapter(one_tool_then_answer, delay=0.01), tools=[note_tool(effects)]
    )
    tasks = [Task(f"t{i}", f"do {i}", assignee="w", id=f"t{i}") for i in range(4)]
    result = await OpenMultiAgent(max_concurrency=4).run_tasks(
        Team("t", [agent]), tasks, checkpoint=checkpoint(InMemoryStore()),
        journal=JournalOptions(journal, durable=False),
    )  # fmt: skip
    assert result.success
    events = await journal.read_from(0)
    for task in tasks:
        assert kinds(events, task.id) == ONE_TOOL_TURN
    assert (await verify_run(journal)).ok


async def test_held_events_of_a_task_no_durable_snapshot_holds_go_out_at_the_end() -> None:
    # Durable mode holds events until a snapshot covers them; a task whose first model call
    # failed never reached one. Its prompt is folded-type, yet no restore would fold it (no
    # entry), so the attempt's end lets it out with run/end instead of dropping the tail.
    journal = InMemoryRunJournal()

    def fail(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        raise LLMError("scripted", "down")

    result = await OpenMultiAgent().run_tasks(
        Team("t", [AgentConfig("w", adapter=ScriptedAdapter(fail))]), [Task("a", "x", id="a")],
        checkpoint=checkpoint(InMemoryStore()), journal=JournalOptions(journal, durable=True),
    )  # fmt: skip
    assert not result.success
    types = kinds(await journal.read_from(0))
    assert types[-4:] == ["turn/start", "turn/end", "task/status", "run/end"]
    assert "user/message" in types


async def test_journal_first_records_llm_requests_only_when_lineage_is_enforced() -> None:
    agent = AgentConfig("w", adapter=ScriptedAdapter(one_tool_then_answer), tools=[note_tool([])])
    for enforce, expected in ((False, 0), (True, 2)):
        journal = InMemoryRunJournal()
        result = await OpenMultiAgent().run_tasks(
            Team("t", [agent]), [Task("a", "x", assignee="w", id="a")],
            checkpoint=checkpoint(InMemoryStore()),
            journal=JournalOptions(journal, enforce_lineage=enforce),
        )  # fmt: skip
        assert result.success
        events = await journal.read_from(0)
        assert len(of_type(events, "llm/request")) == expected
        assert len(of_type(events, "turn/start")) == 2
        assert (await verify_run(journal)).ok

"""Every model call of a run is journaled, as OMA journals it: the coordinator's and run_agent's.

OMA records the coordinator's decomposition (with its repair request) and synthesis, and the
conversation of ``runAgent`` (``run/start`` mode ``runAgent``), with the events a task's runner
yields, under the agent's name and without a ``taskId``. ``verify_run`` passes on all of them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.agents.facts import Answered, TurnEnded
from oma_actors.agents.loop import prompted
from oma_actors.agents.turn import after_response, initial_state
from oma_actors.errors import LLMError
from oma_actors.journal import InMemoryRunJournal, JournalEvent, JournalOptions, verify_run
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.orchestration.journal_calls import ConversationJournal
from oma_actors.orchestration.journaling import RunJournaling
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

PLAN = [{"title": "Research", "description": "find facts", "assignee": "worker"}]
# One model call, recorded as a task's runner records it (prompt first, answer names request).
ONE_CALL = ["user/message", "turn/start", "llm/request", "assistant/message", "turn/end"]


def answer(text: str, usage: tuple[int, int] = (1, 1)) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(*usage))


def squad() -> Team:
    return Team("t", [AgentConfig("worker", adapter=ScriptedAdapter(lambda m, o: answer("r")))])


def journal_options(journal: InMemoryRunJournal) -> JournalOptions:
    return JournalOptions(journal, durable=False)


def of(events: Sequence[JournalEvent], agent: str) -> list[JournalEvent]:
    return [e for e in events if e.agent_name == agent]


def types(events: Sequence[JournalEvent]) -> list[str]:
    return [e.type for e in events if e.type != "checkpoint/saved"]


async def run_team(lead: ScriptedAdapter, journal: InMemoryRunJournal) -> Any:
    return await OpenMultiAgent().run_team(
        squad(),
        "explain",
        coordinator=AgentConfig("lead", adapter=lead),
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="team-1"),
        journal=journal_options(journal),
    )


async def test_decomposition_and_synthesis_are_journaled_under_the_coordinator() -> None:
    journal = InMemoryRunJournal()
    lead = ScriptedAdapter([answer(json.dumps(PLAN), (10, 4)), answer("final", (5, 2))])
    result = await run_team(lead, journal)
    assert result.success
    events = await journal.read_from(0)
    lead_events = of(events, "lead")
    assert types(lead_events) == ONE_CALL + ONE_CALL  # decomposition, then synthesis
    assert all(e.task_id is None for e in lead_events)
    everything = types(events)
    # OMA's order: run/start, the decomposition, the plan, the tasks, the synthesis, run/end.
    assert everything[0] == "run/start"
    assert events[0].data == {"mode": "runTeam", "goal": "explain"}
    assert everything[1:6] == ONE_CALL
    assert everything[6] == "plan/set"
    assert everything[-6:] == [*ONE_CALL, "run/end"]
    assert everything.count("run/start") == everything.count("run/end") == 1
    decomposition, synthesis = [e for e in lead_events if e.type == "assistant/message"]
    assert decomposition.data["usage"] == {"input_tokens": 10, "output_tokens": 4}
    assert synthesis.data["message"]["content"] == [{"type": "text", "text": "final"}]
    # Each conversation starts afresh: the synthesis request holds only its own prompt.
    requests = [e for e in lead_events if e.type == "llm/request"]
    assert [len(r.data["blocks"]) for r in requests] == [1, 1]
    assert [e.data["turn"] for e in lead_events if e.type == "turn/end"] == [1, 1]
    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures
    assert verdict.stats["requests"] == 3  # two of the coordinator's, one of the worker's


async def test_the_repair_request_continues_the_coordinators_conversation() -> None:
    journal = InMemoryRunJournal()
    bad = [{"title": "Research", "description": "x", "assignee": "ghost"}]
    lead = ScriptedAdapter([answer(json.dumps(bad)), answer(json.dumps(PLAN)), answer("done")])
    assert (await run_team(lead, journal)).success
    events = await journal.read_from(0)
    decomposition = of(events, "lead")[: 2 * len(ONE_CALL)]
    assert types(decomposition) == ONE_CALL + ONE_CALL
    repair = [e for e in decomposition if e.type == "user/message"][1]
    assert "ghost" in repair.data["message"]["content"][0]["text"]
    second_request = [e for e in decomposition if e.type == "llm/request"][1]
    assert len(second_request.data["blocks"]) == 3  # prompt, bad answer, repair
    assert [e.data["turn"] for e in decomposition if e.type == "turn/start"] == [1, 2]
    assert (await verify_run(journal)).ok


async def test_a_failed_decomposition_call_closes_its_turn_and_the_run() -> None:
    def down(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        raise LLMError("scripted", "overloaded")

    journal = InMemoryRunJournal()
    result = await run_team(ScriptedAdapter(down), journal)
    assert not result.success
    events = await journal.read_from(0)
    assert types(events) == [
        "run/start", "user/message", "turn/start", "llm/request", "turn/end", "run/end"
    ]  # fmt: skip
    assert events[4].data == {"turn": 1, "outcome": "error"}
    assert events[4].agent_name == "lead"
    assert events[-1].data["status"] == {"code": "error"}
    assert "COORDINATOR_DECOMPOSITION_FAILED" in events[-1].data["error"]["message"]


class Note(BaseModel):
    text: str


async def _note(args: Note, ctx: ToolContext) -> str:
    return f"noted {args.text}"


NOTE = define_tool(name="note", description="n", input_model=Note, execute=_note)


def tool_then_answer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) == 1:
        call = ToolUseBlock("call-1", "note", {"text": "x"})
        return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(3, 2))
    return answer("done")


async def test_run_agent_is_journaled_as_run_agent() -> None:
    journal = InMemoryRunJournal()
    agent = AgentConfig("solo", adapter=ScriptedAdapter(tool_then_answer), tools=[NOTE])
    result = await OpenMultiAgent().run_agent(agent, "hi", journal=journal_options(journal))
    assert result.success
    events = await journal.read_from(0)
    assert types(events) == [
        "run/start",
        "user/message", "turn/start", "llm/request", "assistant/message", "tool/call",
        "tool/result", "user/message", "turn/end",
        "turn/start", "llm/request", "assistant/message", "turn/end",
        "run/end",
    ]  # fmt: skip
    assert events[0].data == {"mode": "runAgent"}
    assert events[-1].data == {"status": {"code": "ok"}}
    assert {e.agent_name for e in events[1:-1]} == {"solo"}
    assert all(e.task_id is None for e in events)
    assert len({e.run_id for e in events}) == 1
    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures
    assert verdict.stats["requests"] == 2


async def test_run_agent_takes_the_orchestrators_journal_unless_told_otherwise() -> None:
    default = InMemoryRunJournal()
    orchestrator = OpenMultiAgent(journal=JournalOptions(default, durable=False))
    agent = AgentConfig("solo", adapter=ScriptedAdapter(lambda m, o: answer("hi")))
    await orchestrator.run_agent(agent, "hi")
    assert types(await default.read_from(0))[0] == "run/start"
    before = len(await default.read_from(0))
    await orchestrator.run_agent(agent, "hi", journal=False)
    assert len(await default.read_from(0)) == before


async def test_a_failed_run_agent_ends_its_journal_with_the_error() -> None:
    def down(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        raise LLMError("scripted", "overloaded")

    journal = InMemoryRunJournal()
    agent = AgentConfig("solo", adapter=ScriptedAdapter(down))
    result = await OpenMultiAgent().run_agent(agent, "hi", journal=journal_options(journal))
    assert not result.success
    events = await journal.read_from(0)
    assert types(events)[-2:] == ["turn/end", "run/end"]
    assert events[-2].data == {"turn": 1, "outcome": "error"}
    assert events[-1].data == {"status": {"code": "error"}, "error": {"message": result.output}}


async def test_each_conversation_of_one_agent_is_recorded_from_its_own_prompt() -> None:
    """The coordinator's second conversation (synthesis) starts afresh, snapshot or not."""
    journal = InMemoryRunJournal()
    journaling = await RunJournaling.open(
        journal_options(journal), run_id="r", attempt=1, emit=lambda event: None
    )
    journaling.recorder.stop_keeping()
    calls = ConversationJournal(journaling, "lead")
    options = ChatOptions(model="m")
    for prompt in ("plan it", "sum it up"):
        state = initial_state(prompt)
        calls.request(state, options, None, prompted(state))
        response = answer("ok")
        after = after_response(state, response)
        fact = Answered(
            message=after.conversation[-1], usage=response.usage, stop_reason=response.stop_reason
        )
        ended = TurnEnded(turn=after.turns, outcome="completed")
        await calls.boundary(after, "terminal", (fact, ended))
        calls.close()
    await journaling.recorder.flush()
    events = await journal.read_from(0)
    assert types(events) == ONE_CALL + ONE_CALL
    prompts = [e.data["message"]["content"][0]["text"] for e in events if e.type == "user/message"]
    assert prompts == ["plan it", "sum it up"]
    assert (await verify_run(journal)).ok


async def test_a_cancelled_run_agent_raises_the_cancellation_and_ends_its_journal_aborted() -> None:
    # Cancellation is never swallowed: the caller gets it, and the journal says the run ended.
    journal = InMemoryRunJournal()
    asked = asyncio.Event()

    class Slow:
        async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
            asked.set()
            await asyncio.sleep(30)
            return answer("late")

    agent = AgentConfig("solo", adapter=Slow())
    call = asyncio.ensure_future(
        OpenMultiAgent().run_agent(agent, "hi", journal=journal_options(journal))
    )
    await asked.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    events = await journal.read_from(0)
    while not events or events[-1].type != "run/end":  # appended in the background
        await asyncio.sleep(0.001)
        events = await journal.read_from(0)
    assert events[-1].data["status"] == {"code": "aborted"}

"""``RunnerActor`` and ``AgentActor``: typed replies and exhaustive message matching."""

from __future__ import annotations

from typing import Any, cast

import pytest
from pydantic import BaseModel

from oma_actors.actors import Actor, ActorSystem
from oma_actors.agents.config import AgentConfig
from oma_actors.agents.runner import (
    ExecuteTask,
    ResolvedAgent,
    RunnerActor,
    RunnerFinished,
    TaskOutcome,
    failure_text,
)
from oma_actors.domain.messages import LLMResponse, ToolUseBlock
from oma_actors.events import ProgressEvent
from oma_actors.llm.scripted import ScriptedAdapter, text_response
from oma_actors.orchestration.agent_actor import AgentActor
from oma_actors.tools.base import define_tool


def resolved(*answers: str) -> ResolvedAgent:
    adapter = ScriptedAdapter([text_response(answer) for answer in answers])
    return ResolvedAgent(config=AgentConfig("solo", model="m", adapter=adapter), adapter=adapter)


def runner(agent: ResolvedAgent) -> RunnerActor:
    events: list[ProgressEvent] = []
    return RunnerActor(agent, run_id=None, emit=events.append)


class Inbox(Actor[RunnerFinished, None]):
    def __init__(self) -> None:
        self.received: list[RunnerFinished] = []

    async def receive(self, message: RunnerFinished) -> None:
        self.received.append(message)


async def test_an_ask_answers_the_task_outcome_and_tells_reply_to() -> None:
    inbox = Inbox()
    async with ActorSystem() as system:
        ref = system.spawn(runner(resolved("hello")))
        box = system.spawn(inbox)
        outcome = await ref.ask(ExecuteTask(task=None, prompt="hi", reply_to=box))
        await box.stop()
    assert isinstance(outcome, TaskOutcome)
    assert outcome.result.output == "hello"
    assert outcome.attempts == 1
    assert inbox.received == [RunnerFinished(outcome=outcome)]


@pytest.mark.parametrize("message", ["not a message", RunnerFinished])
async def test_the_runner_refuses_a_message_outside_its_union(message: Any) -> None:
    with pytest.raises(AssertionError):
        await runner(resolved()).receive(cast("ExecuteTask", message))


async def test_the_agent_refuses_a_message_outside_its_union() -> None:
    async with ActorSystem() as system:
        agent = AgentActor(resolved(), system, run_id=None, emit=lambda event: None)
        with pytest.raises(AssertionError):
            await agent.receive(cast("Any", ExecuteTask(task=None, prompt="x")))


class Query(BaseModel):
    q: str


def failing() -> RunnerActor:
    """A runner whose tool call's commit boundary raises (a broken writer): an error that
    escapes the task's loop."""

    async def search(args: Any, ctx: Any) -> str:
        return "found"

    tool = define_tool(name="search", description="s", input_model=Query, execute=search)
    adapter = ScriptedAdapter(
        [LLMResponse([ToolUseBlock("c1", "search", {"q": "x"})], stop_reason="tool_use")]
    )
    agent = ResolvedAgent(
        config=AgentConfig("solo", model="m", adapter=adapter, tools=[tool]), adapter=adapter
    )

    async def boundary(state: Any, kind: str, facts: Any) -> bool:
        if kind == "tool_commit":
            raise RuntimeError("the writer broke")
        return True

    return RunnerActor(agent, run_id=None, emit=lambda event: None, on_boundary=boundary)


async def test_an_unexpected_error_fails_the_task_for_reply_to_and_raises_to_a_bare_ask() -> None:
    # Told to reply_to, the failure is an outcome (whoever waits for it must hear back); asked
    # without one, the asker is the only one waiting, and gets the error itself.
    inbox = Inbox()
    async with ActorSystem() as system:
        box = system.spawn(inbox)
        told = await system.spawn(failing()).ask(ExecuteTask(task=None, prompt="hi", reply_to=box))
        with pytest.raises(ExceptionGroup) as caught:
            await system.spawn(failing()).ask(ExecuteTask(task=None, prompt="hi"))
        await box.stop()
    assert caught.group_contains(RuntimeError, match="the writer broke")
    assert told.result.success is False
    assert told.result.output == "RuntimeError: the writer broke"  # the cause, not the group
    assert inbox.received == [RunnerFinished(outcome=told)]


def test_a_failure_names_every_error_of_a_nested_group() -> None:
    nested = ExceptionGroup(
        "outer", [ValueError("bad"), ExceptionGroup("inner", [KeyError("k"), OSError("disk")])]
    )
    assert failure_text(nested) == "ValueError: bad; KeyError: 'k'; OSError: disk"
    assert failure_text(RuntimeError("x")) == "RuntimeError: x"

"""``RunnerActor`` and ``AgentActor``: typed replies and exhaustive message matching."""

from __future__ import annotations

from typing import Any, cast

import pytest

from oma_actors.actors import Actor, ActorSystem
from oma_actors.agents.config import AgentConfig
from oma_actors.agents.runner import (
    ExecuteTask,
    ResolvedAgent,
    RunnerActor,
    RunnerFinished,
    TaskOutcome,
)
from oma_actors.events import ProgressEvent
from oma_actors.llm.scripted import ScriptedAdapter, text_response
from oma_actors.orchestration.agent_actor import AgentActor


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

"""``AgentConfig`` and ``Team`` refuse a bad roster when built, naming what is wrong."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from oma_actors import AgentConfig, ConfigurationError, Team, define_tool
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


class Nothing(BaseModel):
    """No input."""


async def nothing(args: Nothing, ctx: object) -> str:
    return ""


def tool(name: str) -> Any:
    return define_tool(name=name, description=name, input_model=Nothing, execute=nothing)


def agent(name: str = "worker", **changes: Any) -> AgentConfig:
    return AgentConfig(name, adapter=ScriptedAdapter([]), **changes)


@pytest.mark.parametrize(
    ("build", "named"),
    [
        (lambda: agent(""), "AgentConfig.name must be a non-empty string"),
        (lambda: agent("  "), "AgentConfig.name must be a non-empty string"),
        (lambda: agent(7), "AgentConfig.name must be a non-empty string"),
        (lambda: agent("ops/worker"), "must not contain '/' (it namespaces memory keys)"),
        (lambda: agent(max_turns=0), "AgentConfig.max_turns must be an int >= 1, got 0"),
        (lambda: agent(max_turns=2.5), "AgentConfig.max_turns must be an int >= 1, got 2.5"),
        (lambda: agent(max_token_budget=-1), "max_token_budget must be None or an int >= 0"),
        (lambda: agent(max_token_budget=True), "max_token_budget must be None or an int >= 0"),
        (lambda: agent(context_strategy="slide"), "AgentConfig.context_strategy must be"),
        (lambda: agent(tools=[tool("a"), tool("b"), tool("a")]),
         "agent 'worker' has duplicate tool names: a"),
        (lambda: Team("t", []), "team 't' has no agents"),
        (lambda: Team("t", [agent("a"), agent("b"), agent("a")]),
         "team 't' has duplicate agent names: a"),
        (lambda: Team("t", [agent()], shared_memory_store={}),
         "Team.shared_memory_store must have async get, set, list, delete and clear"),
        (lambda: Team("t", [agent("a"), agent("b")]).agent("c"),
         "team 't' has no agent 'c' (roster: a, b)"),
    ],
)  # fmt: skip
def test_a_bad_roster_is_refused_naming_what_is_wrong(build: Any, named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert named in str(caught.value)


def test_a_good_roster_is_kept_as_given() -> None:
    team = Team("t", [agent("a", tools=[tool("x")]), agent("b")])
    assert [member.name for member in team.agents] == ["a", "b"]
    assert team.agent("b").name == "b"
    assert (team.shared_memory, team.shared_memory_store) == (False, None)
    store = InMemoryStore()
    shared = Team("t", [agent()], shared_memory_store=store)
    assert (shared.shared_memory, shared.shared_memory_store) == (True, store)
    private = Team("t", [agent()], shared_memory=True)
    assert isinstance(private.shared_memory_store, InMemoryStore)  # spec CO-09

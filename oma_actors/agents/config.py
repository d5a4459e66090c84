"""Agent and team configuration (API.md "Teams, agents, tasks")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oma_actors.agents.context import STRATEGY_TYPES
from oma_actors.errors import ConfigurationError
from oma_actors.stores.base import MemoryStore, is_memory_store
from oma_actors.stores.memory import InMemoryStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.agents.context import ContextStrategy
    from oma_actors.llm.base import LLMAdapter
    from oma_actors.tools.base import Tool


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """One agent: a name, a model and the tools it is granted.

    Args:
        name: unique within the team; shared-memory keys are namespaced by it.
        model: the provider's model name.
        provider: ``"anthropic"``, ``"openai"`` (any OpenAI-compatible server via ``base_url``)
            or ``"scripted"``; an explicit ``adapter`` wins over provider and model.
        system_prompt: the agent's system prompt.
        tools: the tools the agent may call.
        max_turns: model calls allowed per attempt at a task (a restore continues the
            count). As OMA's ``maxTurns``: a conversation that reaches it without a final
            answer still ends normally, succeeding with the last assistant message's text
            (empty if it had none) as its output, so its task completes and is not retried.
        max_token_budget: OMA's ``maxTokenBudget``: input plus output tokens this agent may
            spend on one task, counted across restores (a restored runner continues from its
            saved usage). A model response that takes the total above it stops the runner
            (after that turn's tool calls, if any); the task fails and the run's status is
            ``budget_exhausted``. ``None`` (the default) sets no budget.
        context_strategy: how the conversation shrinks before a model call
            (``SlidingWindow``, ``Summarize``, ``CompressToolResults``, ``CustomContext``; see
            ``oma_actors.agents.context``); each rewrite is journaled as ``context/replace``.
        adapter: an explicit adapter (e.g. ``ScriptedAdapter``).
        base_url: the provider endpoint (OpenAI-compatible servers).
        api_key: the provider key; defaults to the SDK's environment variable.
    """

    name: str
    model: str = field(default="", kw_only=True)
    provider: str | None = field(default=None, kw_only=True)
    system_prompt: str | None = field(default=None, kw_only=True)
    tools: Sequence[Tool] = field(default=(), kw_only=True)
    max_turns: int = field(default=10, kw_only=True)
    max_token_budget: int | None = field(default=None, kw_only=True)
    context_strategy: ContextStrategy | None = field(default=None, kw_only=True)
    adapter: LLMAdapter | None = field(default=None, kw_only=True, compare=False)
    base_url: str | None = field(default=None, kw_only=True)
    api_key: str | None = field(default=None, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError("AgentConfig.name must be a non-empty string")
        if "/" in self.name:
            raise ConfigurationError(
                f"AgentConfig.name {self.name!r} must not contain '/' (it namespaces memory keys)"
            )
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise ConfigurationError(
                f"AgentConfig.max_turns must be an int >= 1, got {self.max_turns!r}"
            )
        budget = self.max_token_budget
        if budget is not None and (
            not isinstance(budget, int) or isinstance(budget, bool) or budget < 0
        ):
            raise ConfigurationError(
                f"AgentConfig.max_token_budget must be None or an int >= 0, got {budget!r}"
            )
        strategy = self.context_strategy
        if strategy is not None and not isinstance(strategy, STRATEGY_TYPES):
            raise ConfigurationError(
                "AgentConfig.context_strategy must be SlidingWindow, Summarize, "
                f"CompressToolResults, CustomContext or None, got {strategy!r}"
            )
        object.__setattr__(self, "tools", tuple(self.tools))
        names = [tool.name for tool in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigurationError(
                f"agent {self.name!r} has duplicate tool names: {', '.join(duplicates)}"
            )


@dataclass(frozen=True, slots=True)
class Team:
    """A named roster of agents, optionally with shared memory.

    Args:
        name: the team's name.
        agents: the roster; names must be unique.
        shared_memory_store: the store behind the team's shared memory.
        shared_memory: give the team shared memory on a private in-memory store when no
            ``shared_memory_store`` is given (OMA's ``sharedMemory: true``).
    """

    name: str
    agents: Sequence[AgentConfig]
    shared_memory_store: MemoryStore | None = field(default=None, kw_only=True, compare=False)
    shared_memory: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "agents", tuple(self.agents))
        if not self.agents:
            raise ConfigurationError(f"team {self.name!r} has no agents")
        names = [agent.name for agent in self.agents]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigurationError(
                f"team {self.name!r} has duplicate agent names: {', '.join(duplicates)}"
            )
        store = self.shared_memory_store
        if store is not None and not is_memory_store(store):
            raise ConfigurationError(
                "Team.shared_memory_store must have async get, set, list, delete and clear"
            )
        if store is not None:
            object.__setattr__(self, "shared_memory", True)
        elif self.shared_memory:
            # The team's own private store, reused across its runs (spec CO-09).
            object.__setattr__(self, "shared_memory_store", InMemoryStore())

    def agent(self, name: str) -> AgentConfig:
        """The agent called ``name``; ``ConfigurationError`` naming the roster if absent."""
        for agent in self.agents:
            if agent.name == name:
                return agent
        roster = ", ".join(agent.name for agent in self.agents)
        raise ConfigurationError(f"team {self.name!r} has no agent {name!r} (roster: {roster})")

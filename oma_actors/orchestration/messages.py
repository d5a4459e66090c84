"""The messages of one run's actors: RunActor <- runners/agents, AgentActor <- RunActor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.agents.runner import RunnerFinished

if TYPE_CHECKING:
    import asyncio

    from oma_actors.actors import ActorRef
    from oma_actors.agents.facts import Facts
    from oma_actors.agents.runner import TaskOutcome
    from oma_actors.domain.inflight import BoundaryKind, RunnerState
    from oma_actors.domain.tasks import TaskState


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRun:
    """Start dispatching; ``done`` resolves when the run is over (finished, halted, suspended)."""

    done: asyncio.Future[None]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFinished:
    """A task's final outcome (after its retries)."""

    outcome: TaskOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class Boundary:
    """A runner reached a durable boundary; the reply says whether it was saved."""

    task_id: str
    agent: str
    state: RunnerState
    kind: BoundaryKind
    facts: Facts = ()  # what the runner did to reach ``state`` (the journal records them)


RunMessage = StartRun | TaskFinished | Boundary


@dataclass(frozen=True, slots=True, kw_only=True)
class Assign:
    """Give a task to an agent, optionally resuming a saved conversation."""

    task: TaskState
    prompt: str
    run: ActorRef[RunMessage]
    resume: RunnerState | None = None
    checkpointed: bool = False


AgentMessage = Assign | RunnerFinished

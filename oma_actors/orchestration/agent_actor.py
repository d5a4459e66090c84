"""``AgentActor``: one agent of a run's team, spawning a RunnerActor per assigned task."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias, assert_never

from oma_actors.actors import Actor
from oma_actors.agents.runner import ExecuteTask, RunnerActor, RunnerFinished
from oma_actors.orchestration.messages import (
    AgentMessage,
    Assign,
    Boundary,
    RunMessage,
    TaskFinished,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from oma_actors.actors import ActorRef, ActorSystem
    from oma_actors.agents.facts import Facts
    from oma_actors.agents.loop import BoundaryHook, RequestHook
    from oma_actors.agents.runner import (
        Emit,
        FactHook,
        ResolvedAgent,
        RunnerMessage,
        TaskOutcome,
    )
    from oma_actors.agents.tool_calls import CallPolicy
    from oma_actors.domain.inflight import BoundaryKind, RunnerState


RequestHooks: TypeAlias = "Callable[[str, str], RequestHook]"
"""Builds the model-request hook of one task (task id, agent): the run's journal (spec 17.2)."""
FactHooks: TypeAlias = "Callable[[str, str], FactHook]"
"""Builds the hook of one task (task id, agent) taking its runner's retries: the run's journal."""
BoundaryHooks: TypeAlias = "Callable[[str, str], BoundaryHook]"
"""Builds the boundary hook of one task of a run without a checkpoint: the run's journal."""


def boundary_hook(run: ActorRef[RunMessage], task_id: str, agent: str) -> BoundaryHook:
    """A runner hook that reports each boundary to the run and waits for its save."""

    async def report(state: RunnerState, kind: BoundaryKind, facts: Facts) -> bool:
        durable = await run.ask(
            Boundary(task_id=task_id, agent=agent, state=state, kind=kind, facts=facts)
        )
        return durable is True

    return report


class AgentActor(Actor[AgentMessage, None]):
    """One agent of the team: spawns a RunnerActor per assigned task and relays its outcome.

    It is only told, never asked: its reply is ``None``.
    """

    def __init__(
        self,
        agent: ResolvedAgent,
        system: ActorSystem,
        *,
        run_id: str | None,
        emit: Emit,
        policy: CallPolicy | None = None,
        requests: RequestHooks | None = None,
        observers: BoundaryHooks | None = None,
        reporters: FactHooks | None = None,
    ) -> None:
        self._agent = agent
        self._system = system
        self._run_id = run_id
        self._emit = emit
        self._policy = policy
        self._requests = requests
        self._observers = observers
        self._reporters = reporters
        self._runners: dict[str, ActorRef[RunnerMessage, TaskOutcome]] = {}
        self._runs: dict[str, ActorRef[RunMessage]] = {}
        self._self: ActorRef[AgentMessage] | None = None

    def bind(self, ref: ActorRef[AgentMessage]) -> None:
        """Give the actor its own reference (runners reply to it)."""
        self._self = ref

    async def receive(self, message: AgentMessage) -> None:
        """Spawn a runner for an assignment; forward a runner's outcome to the run."""
        match message:
            case Assign(task=task, run=run):
                assert self._self is not None
                hook: BoundaryHook | None = None
                if message.checkpointed:
                    hook = boundary_hook(run, task.id, self._agent.name)
                elif self._observers is not None:
                    # Not checkpointed: the journal alone sees the boundaries.
                    hook = self._observers(task.id, self._agent.name)
                runner = self._system.spawn(
                    RunnerActor(
                        self._agent,
                        run_id=self._run_id,
                        emit=self._emit,
                        on_boundary=hook,
                        policy=self._policy,
                        on_request=(
                            self._requests(task.id, self._agent.name) if self._requests else None
                        ),
                        on_facts=(
                            self._reporters(task.id, self._agent.name) if self._reporters else None
                        ),
                    ),
                    name=f"runner:{self._agent.name}:{task.id}",
                )
                self._runners[task.id] = runner
                self._runs[task.id] = run
                runner.tell(
                    ExecuteTask(
                        task=task, prompt=message.prompt, resume=message.resume, reply_to=self._self
                    )
                )
            case RunnerFinished(outcome=outcome):
                task_id = outcome.task_id or ""
                await self._runners.pop(task_id).stop()
                self._runs.pop(task_id).tell(TaskFinished(outcome=outcome))
            case _:
                assert_never(message)

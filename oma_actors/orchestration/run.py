"""The actors of one orchestrated run: ``RunActor`` (queue, dispatch) and ``AgentActor``.

The RunActor owns the task queue and every decision about it. It dispatches ready tasks to their
agents up to ``max_concurrency``; each AgentActor spawns one RunnerActor per task. Outcomes flow
back as messages, so the queue is only ever touched by the RunActor, one message at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oma_actors.actors import Actor, ActorRef, ActorSystem
from oma_actors.agents.runner import (
    Emit,
    ExecuteTask,
    ResolvedAgent,
    RunnerActor,
    RunnerFinished,
    TaskOutcome,
)
from oma_actors.events import (
    AgentCompleted,
    TaskCompleted,
    TaskFailed,
    TaskSkipped,
    TaskStarted,
)
from oma_actors.orchestration.prompts import task_prompt
from oma_actors.orchestration.shared_memory import SharedMemory, task_result_key

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Mapping

    from oma_actors.domain.results import AgentRunResult
    from oma_actors.domain.tasks import TaskState
    from oma_actors.orchestration.queue import TaskQueue


@dataclass(frozen=True, slots=True, kw_only=True)
class Assign:
    """Give a task to an agent."""

    task: TaskState
    prompt: str
    run: ActorRef[RunMessage]


AgentMessage = Assign | RunnerFinished


class AgentActor(Actor[AgentMessage]):
    """One agent of the team: spawns a RunnerActor per assigned task and relays its outcome."""

    def __init__(
        self, agent: ResolvedAgent, system: ActorSystem, *, run_id: str | None, emit: Emit
    ) -> None:
        self._agent = agent
        self._system = system
        self._run_id = run_id
        self._emit = emit
        self._runners: dict[str, ActorRef[ExecuteTask]] = {}
        self._runs: dict[str, ActorRef[RunMessage]] = {}
        self._self: ActorRef[AgentMessage] | None = None

    def bind(self, ref: ActorRef[AgentMessage]) -> None:
        """Give the actor its own reference (runners reply to it)."""
        self._self = ref

    async def receive(self, message: AgentMessage) -> None:
        """Spawn a runner for an assignment; forward a runner's outcome to the run."""
        match message:
            case Assign(task=task, prompt=prompt, run=run):
                assert self._self is not None
                runner = self._system.spawn(
                    RunnerActor(self._agent, run_id=self._run_id, emit=self._emit),
                    name=f"runner:{self._agent.name}:{task.id}",
                )
                self._runners[task.id] = runner
                self._runs[task.id] = run
                runner.tell(ExecuteTask(task=task, prompt=prompt, reply_to=self._self))
            case RunnerFinished(outcome=outcome):
                task_id = outcome.task_id or ""
                runner = self._runners.pop(task_id)
                await runner.stop()
                self._runs.pop(task_id).tell(TaskFinished(outcome=outcome))


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRun:
    """Start dispatching; ``done`` resolves when every task is terminal."""

    done: asyncio.Future[None]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFinished:
    """A task's final outcome (after its retries)."""

    outcome: TaskOutcome


RunMessage = StartRun | TaskFinished


@dataclass(slots=True, kw_only=True)
class RunState:
    """What a run has produced so far, read by the facade when the run ends."""

    task_results: dict[str, AgentRunResult] = field(default_factory=dict)
    agent_results: dict[str, AgentRunResult] = field(default_factory=dict)


class RunActor(Actor[RunMessage]):
    """Owns the queue of one run and dispatches it (spec TQ-08, SV-01 ordering, EV-01)."""

    def __init__(
        self,
        *,
        run_id: str,
        queue: TaskQueue,
        agents: Mapping[str, ActorRef[AgentMessage]],
        memory: SharedMemory | None,
        max_concurrency: int,
        emit: Emit,
        state: RunState,
    ) -> None:
        self._run_id = run_id
        self._queue = queue
        self._agents = agents
        self._roster = list(agents)
        self._memory = memory
        self._max_concurrency = max_concurrency
        self._emit = emit
        self._state = state
        self._in_flight: dict[str, str] = {}  # task id -> agent
        self._done: asyncio.Future[None] | None = None
        self._self: ActorRef[RunMessage] | None = None

    def bind(self, ref: ActorRef[RunMessage]) -> None:
        """Give the actor its own reference (agents reply to it)."""
        self._self = ref

    async def receive(self, message: RunMessage) -> None:
        """Start the run or record a task outcome, then dispatch what became ready."""
        match message:
            case StartRun(done=done):
                self._done = done
            case TaskFinished(outcome=outcome):
                await self._finish(outcome)
        self._dispatch()

    def _dispatch(self) -> None:
        assert self._self is not None
        for task in self._queue.ready():
            if len(self._in_flight) >= self._max_concurrency:
                break
            agent = self._choose_agent(task)
            started = self._queue.start(task.id, agent)
            self._in_flight[task.id] = agent
            self._emit(
                TaskStarted(run_id=self._run_id, task_id=task.id, title=task.title, agent=agent)
            )
            dependencies = [self._queue.get(dep) for dep in started.depends_on]
            prompt = task_prompt(started, dependencies)
            self._agents[agent].tell(Assign(task=started, prompt=prompt, run=self._self))
        if not self._in_flight and self._done is not None and not self._done.done():
            # Nothing runs and nothing can start: whatever is left can never become ready.
            for task in self._queue.skip_remaining(
                "Skipped: task scheduling failed — no runnable task."
            ):
                self._emit(
                    TaskSkipped(
                        run_id=self._run_id,
                        task_id=task.id,
                        title=task.title,
                        reason=task.result or "",
                    )
                )
            self._done.set_result(None)

    def _choose_agent(self, task: TaskState) -> str:
        if task.assignee is not None:
            return task.assignee
        # Unassigned tasks go to the least busy agent, ties broken by roster order.
        load = {name: 0 for name in self._roster}
        for name in self._in_flight.values():
            load[name] += 1
        return min(self._roster, key=lambda name: load[name])

    async def _finish(self, outcome: TaskOutcome) -> None:
        task_id = outcome.task_id or ""
        agent = self._in_flight.pop(task_id)
        task = self._queue.get(task_id)
        result = outcome.result
        self._state.task_results[task_id] = result
        self._state.agent_results[agent] = result
        if result.success:
            # Spec SV-01 / EV-01: shared-memory write, turn, queue, (checkpoint), then events.
            if self._memory is not None:
                await self._memory.write(agent, task_result_key(task_id), result.output)
                self._memory.advance_turn()
            self._queue.complete(task_id, result.output)
            self._emit(
                TaskCompleted(
                    run_id=self._run_id,
                    task_id=task_id,
                    title=task.title,
                    agent=agent,
                    result=result,
                )
            )
            self._emit(
                AgentCompleted(run_id=self._run_id, agent=agent, task_id=task_id, result=result)
            )
            return
        cascade = self._queue.fail(task_id, result.output)
        self._emit(
            TaskFailed(
                run_id=self._run_id,
                task_id=task_id,
                title=task.title,
                agent=agent,
                error=result.output,
            )
        )
        self._emit(AgentCompleted(run_id=self._run_id, agent=agent, task_id=task_id, result=result))
        for dependent in cascade:
            self._emit(
                TaskFailed(
                    run_id=self._run_id,
                    task_id=dependent.id,
                    title=dependent.title,
                    agent=dependent.assignee,
                    error=dependent.result or "",
                )
            )

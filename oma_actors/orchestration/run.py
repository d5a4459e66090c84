"""The actors of one orchestrated run: ``RunActor`` (queue, dispatch, saves) and ``AgentActor``.

The RunActor owns the task queue, the in-flight runner states and every decision about them. It
dispatches ready tasks to their agents up to ``max_concurrency``; each AgentActor spawns one
RunnerActor per task. Runners report durable boundaries to the RunActor, which builds the
snapshot from its own state (so it is consistent) and has the CheckpointActor write it. Because
the RunActor handles one message at a time, snapshots are built and written in boundary order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oma_actors.actors import Actor, ActorRef, ActorSystem
from oma_actors.agents.runner import ExecuteTask, RunnerActor, RunnerFinished, TaskOutcome
from oma_actors.checkpoint.writer import Save, Saved
from oma_actors.events import AgentCompleted, TaskCompleted, TaskFailed, TaskSkipped, TaskStarted
from oma_actors.orchestration.checkpointing import build_snapshot
from oma_actors.orchestration.prompts import task_prompt
from oma_actors.orchestration.shared_memory import task_result_key

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Mapping

    from oma_actors.agents.loop import BoundaryHook
    from oma_actors.agents.runner import Emit, ResolvedAgent
    from oma_actors.checkpoint.writer import CheckpointMessage
    from oma_actors.domain.inflight import BoundaryKind, RunnerState
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.domain.tasks import TaskState
    from oma_actors.orchestration.checkpointing import RunCheckpointing
    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.shared_memory import SharedMemory


@dataclass(frozen=True, slots=True, kw_only=True)
class Assign:
    """Give a task to an agent, optionally resuming a saved conversation."""

    task: TaskState
    prompt: str
    run: ActorRef[RunMessage]
    resume: RunnerState | None = None
    checkpointed: bool = False


AgentMessage = Assign | RunnerFinished


def boundary_hook(run: ActorRef[RunMessage], task_id: str, agent: str) -> BoundaryHook:
    """A runner hook that reports each boundary to the run and waits for its save."""

    async def report(state: RunnerState, kind: BoundaryKind) -> bool:
        durable = await run.ask(Boundary(task_id=task_id, agent=agent, state=state, kind=kind))
        return durable is True

    return report


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
            case Assign(task=task, run=run):
                assert self._self is not None
                hook = (
                    boundary_hook(run, task.id, self._agent.name) if message.checkpointed else None
                )
                runner = self._system.spawn(
                    RunnerActor(
                        self._agent, run_id=self._run_id, emit=self._emit, on_boundary=hook
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


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRun:
    """Start dispatching; ``done`` resolves when every task is terminal."""

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


RunMessage = StartRun | TaskFinished | Boundary


@dataclass(slots=True, kw_only=True)
class RunState:
    """What a run has produced so far, read by the facade when the run ends."""

    task_results: dict[str, AgentRunResult] = field(default_factory=dict)
    agent_results: dict[str, AgentRunResult] = field(default_factory=dict)
    revision: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunWiring:
    """Everything a RunActor works with besides its queue."""

    run_id: str
    agents: Mapping[str, ActorRef[AgentMessage]]
    memory: SharedMemory | None
    max_concurrency: int
    emit: Emit
    checkpointing: RunCheckpointing | None = None
    writer: ActorRef[CheckpointMessage] | None = None


class RunActor(Actor[RunMessage]):
    """Owns the queue of one run and dispatches it (spec TQ-08, SV-01, EV-01)."""

    def __init__(
        self,
        wiring: RunWiring,
        queue: TaskQueue,
        state: RunState,
        resume: Mapping[str, tuple[str, RunnerState]] | None = None,
    ) -> None:
        self._w = wiring
        self._queue = queue
        self._state = state
        self._roster = list(wiring.agents)
        self._saved: dict[str, tuple[str, RunnerState]] = dict(resume or {})
        self._resume = {task_id: state for task_id, (_, state) in self._saved.items()}
        self._in_flight: dict[str, str] = {}  # task id -> agent
        self._done: asyncio.Future[None] | None = None
        self._self: ActorRef[RunMessage] | None = None

    def bind(self, ref: ActorRef[RunMessage]) -> None:
        """Give the actor its own reference (agents and runners reply to it)."""
        self._self = ref

    async def receive(self, message: RunMessage) -> bool | None:
        """Start the run, record a boundary or a task outcome, then dispatch what is ready."""
        match message:
            case StartRun(done=done):
                self._done = done
                await self._save()  # admission snapshot (decision D3), best-effort
            case Boundary(task_id=task_id, agent=agent, state=state, kind=kind):
                if kind == "attempt_reset":
                    self._saved.pop(task_id, None)  # retries start fresh (spec TQ-10)
                else:
                    self._saved[task_id] = (agent, state)
                return await self._save(strict=kind == "tool_dispatch")
            case TaskFinished(outcome=outcome):
                await self._finish(outcome)
        self._dispatch()
        return None

    async def _save(self, *, strict: bool = False) -> bool:
        """Save the run as it is now; answers whether the snapshot is durable."""
        cp, writer = self._w.checkpointing, self._w.writer
        if cp is None or writer is None:
            return False
        snapshot = await build_snapshot(
            cp,
            queue=self._queue,
            memory=self._w.memory,
            results=self._state.task_results,
            in_flight=self._saved,
        )
        outcome = await writer.ask(Save(snapshot=snapshot, strict=strict))
        if isinstance(outcome, Saved):
            self._state.revision = outcome.revision
            return True
        return False

    def _dispatch(self) -> None:
        assert self._self is not None
        for task in self._queue.ready():
            if len(self._in_flight) >= self._w.max_concurrency:
                break
            agent = self._choose_agent(task)
            started = self._queue.start(task.id, agent)
            self._in_flight[task.id] = agent
            self._w.emit(
                TaskStarted(run_id=self._w.run_id, task_id=task.id, title=task.title, agent=agent)
            )
            dependencies = [self._queue.get(dep) for dep in started.depends_on]
            self._w.agents[agent].tell(
                Assign(
                    task=started,
                    prompt=task_prompt(started, dependencies),
                    run=self._self,
                    resume=self._resume.pop(task.id, None),
                    checkpointed=self._w.writer is not None,
                )
            )
        if not self._in_flight and self._done is not None and not self._done.done():
            # Nothing runs and nothing can start: whatever is left can never become ready.
            reason = "Skipped: task scheduling failed — no runnable task."
            for task in self._queue.skip_remaining(reason):
                self._w.emit(
                    TaskSkipped(
                        run_id=self._w.run_id, task_id=task.id, title=task.title, reason=reason
                    )
                )
            self._done.set_result(None)

    def _choose_agent(self, task: TaskState) -> str:
        if task.assignee is not None:
            return task.assignee
        # Unassigned tasks go to the least busy agent, ties broken by roster order.
        load = dict.fromkeys(self._roster, 0)
        for name in self._in_flight.values():
            load[name] += 1
        return min(self._roster, key=lambda name: load[name])

    async def _finish(self, outcome: TaskOutcome) -> None:
        task_id = outcome.task_id or ""
        agent = self._in_flight.pop(task_id)
        task = self._queue.get(task_id)
        result = outcome.result
        run_id = self._w.run_id
        self._state.task_results[task_id] = result
        self._state.agent_results[agent] = result
        self._saved.pop(task_id, None)  # spec RN-13
        if not result.success:
            cascade = self._queue.fail(task_id, result.output)
            for failed in (self._queue.get(task_id), *cascade):
                self._w.emit(
                    TaskFailed(
                        run_id=run_id,
                        task_id=failed.id,
                        title=failed.title,
                        agent=failed.assignee,
                        error=failed.result or "",
                    )
                )
            self._w.emit(AgentCompleted(run_id=run_id, agent=agent, task_id=task_id, result=result))
            return
        # Spec SV-01 / EV-01: shared memory, turn, queue, save, and only then the events, so a
        # dependent never starts (and no observer hears of the completion) before it is durable.
        memory = self._w.memory
        if memory is not None:
            await memory.write(agent, task_result_key(task_id), result.output)
            memory.advance_turn()
        self._queue.complete(task_id, result.output)
        await self._save()
        self._w.emit(
            TaskCompleted(
                run_id=run_id, task_id=task_id, title=task.title, agent=agent, result=result
            )
        )
        self._w.emit(AgentCompleted(run_id=run_id, agent=agent, task_id=task_id, result=result))

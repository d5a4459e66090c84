"""Executing a validated queue with a team: the actor system of one run."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from oma_actors.actors import ActorRef, ActorSystem
from oma_actors.agents.runner import resolve_agent
from oma_actors.checkpoint.writer import CheckpointActor, CheckpointMessage
from oma_actors.orchestration.run import (
    AgentActor,
    AgentMessage,
    RunActor,
    RunState,
    RunWiring,
    StartRun,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from oma_actors.agents.config import Team
    from oma_actors.agents.runner import Emit
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.orchestration.checkpointing import RunCheckpointing
    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.shared_memory import SharedMemory


async def execute_queue(
    team: Team,
    queue: TaskQueue,
    *,
    run_id: str,
    memory: SharedMemory | None,
    max_concurrency: int,
    emit: Emit,
    checkpointing: RunCheckpointing | None = None,
    resume: Mapping[str, tuple[str, RunnerState]] | None = None,
    restored_results: Mapping[str, AgentRunResult] | None = None,
) -> RunState:
    """Run every task of ``queue`` to a terminal status and return what the run produced.

    One ``ActorSystem`` per run: no actor outlives it, and leaving it (normally, by error or by
    cancellation) stops every agent, runner and the checkpoint writer.
    """
    state = RunState(task_results=dict(restored_results or {}))
    if checkpointing is not None:
        state.revision = checkpointing.revision
    async with ActorSystem() as system:
        writer: ActorRef[CheckpointMessage] | None = None
        if checkpointing is not None:
            writer = system.spawn(
                CheckpointActor(
                    checkpointing.checkpoint, emit=emit, revision=checkpointing.revision
                ),
                name=f"checkpoint:{run_id}",
            )
        agent_refs: dict[str, ActorRef[AgentMessage]] = {}
        for config in team.agents:
            actor = AgentActor(resolve_agent(config), system, run_id=run_id, emit=emit)
            ref: ActorRef[AgentMessage] = system.spawn(actor, name=f"agent:{config.name}")
            actor.bind(ref)
            agent_refs[config.name] = ref
        wiring = RunWiring(
            run_id=run_id,
            agents=agent_refs,
            memory=memory,
            max_concurrency=max_concurrency,
            emit=emit,
            checkpointing=checkpointing,
            writer=writer,
        )
        run = RunActor(wiring, queue, state, resume)
        run_ref = system.spawn(run, name=f"run:{run_id}")
        run.bind(run_ref)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        run_ref.tell(StartRun(done=done))
        await done
    return state

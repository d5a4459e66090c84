"""Executing a validated queue with a team: the actor system of one run."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from oma_actors.actors import ActorRef, ActorSystem
from oma_actors.agents.runner import Emit, ResolvedAgent, resolve_agent
from oma_actors.orchestration.run import AgentActor, AgentMessage, RunActor, RunState, StartRun

if TYPE_CHECKING:
    from oma_actors.agents.config import Team
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
    agents: dict[str, ResolvedAgent] | None = None,
) -> RunState:
    """Run every task of ``queue`` to a terminal status and return what the run produced.

    One ``ActorSystem`` per run: no actor outlives it, and leaving it (normally, by error or by
    cancellation) stops every agent and runner.
    """
    resolved = agents or {config.name: resolve_agent(config) for config in team.agents}
    state = RunState()
    async with ActorSystem() as system:
        agent_refs: dict[str, ActorRef[AgentMessage]] = {}
        for name, agent in resolved.items():
            actor = AgentActor(agent, system, run_id=run_id, emit=emit)
            ref: ActorRef[AgentMessage] = system.spawn(actor, name=f"agent:{name}")
            actor.bind(ref)
            agent_refs[name] = ref
        run = RunActor(
            run_id=run_id,
            queue=queue,
            agents=agent_refs,
            memory=memory,
            max_concurrency=max_concurrency,
            emit=emit,
            state=state,
        )
        run_ref = system.spawn(run, name=f"run:{run_id}")
        run.bind(run_ref)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        run_ref.tell(StartRun(done=done))
        await done
    return state

"""Executing a validated queue with a team: the actor system of one run."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oma_actors.actors import ActorSystem
from oma_actors.agents.runner import resolve_agent
from oma_actors.agents.tool_calls import CallPolicy
from oma_actors.approvals import DurableApprovalLedger
from oma_actors.checkpoint.writer import CheckpointActor
from oma_actors.clock import SYSTEM_CLOCK, Clock
from oma_actors.domain.results import RunOutcome
from oma_actors.events import RunFinished, RunStarted
from oma_actors.orchestration.agent_actor import AgentActor
from oma_actors.orchestration.dispatch_gate import DispatchGate
from oma_actors.orchestration.messages import StartRun
from oma_actors.orchestration.results import run_status
from oma_actors.orchestration.run import RunActor, RunState, RunWiring
from oma_actors.stores.base import is_atomic_store

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from oma_actors.actors import ActorRef
    from oma_actors.agents.config import Team
    from oma_actors.agents.runner import Emit
    from oma_actors.approvals.gates import Gate
    from oma_actors.checkpoint.run_writer import SaveOutcome
    from oma_actors.checkpoint.writer import CheckpointMessage
    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.errors import LeaseError
    from oma_actors.orchestration.budget import RunBudget
    from oma_actors.orchestration.checkpointing import RunCheckpointing
    from oma_actors.orchestration.journaling import RunJournaling
    from oma_actors.orchestration.messages import AgentMessage
    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.scheduler import DependencyFirst
    from oma_actors.orchestration.shared_memory import SharedMemory
    from oma_actors.runs import RunLeaseHandle


logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunApprovals:
    """The gates of a run and what a restore already knows about its approvals."""

    dispatch_gate: Gate | None = None
    tool_gate: Gate | None = None
    approved_dispatch: Mapping[str, ApprovalRequest] = field(default_factory=dict)
    pending: Mapping[str, ApprovalRequest] = field(default_factory=dict)
    decisions: tuple[ApprovalDecision, ...] = ()


def ledger_for_store(store: object) -> DurableApprovalLedger | None:
    """The approval ledger on ``store`` when it has compare-and-set, else ``None``."""
    if not is_atomic_store(store):
        return None
    return DurableApprovalLedger(store)  # type: ignore[arg-type]


def ledger_for(checkpointing: RunCheckpointing | None) -> DurableApprovalLedger | None:
    """The approval ledger of a checkpointed run whose store has compare-and-set, else None."""
    return ledger_for_store(checkpointing.checkpoint.store) if checkpointing else None


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
    approvals: RunApprovals | None = None,
    announced: Collection[str] | None = (),
    clock: Clock = SYSTEM_CLOCK,
    lease: RunLeaseHandle | None = None,
    budget: RunBudget | None = None,
    journaling: RunJournaling | None = None,
    scheduler: DependencyFirst | None = None,
) -> RunState:
    """Run ``queue`` until it is finished, halted or suspended, and return what it produced.

    ``budget`` is charged with every task result, ``restored_results`` included. ``journaling``:
    the run's journal (the checkpointing's when it has one); without a checkpoint, the task
    runners record their boundaries straight into it.

    One ``ActorSystem`` per run: no actor outlives it, and leaving it (normally, by error or by
    cancellation) stops every agent, runner and the checkpoint writer. With ``lease``, a loss of
    the lease (found by a fenced write or by the heartbeat) ends the run at once: the actors are
    stopped without a grace period and the status is ``aborted`` (spec RS-12).

    Raises:
        DurableApprovalError: an approval integrity problem ended the run.
    """
    approvals = approvals or RunApprovals()
    ledger = ledger_for(checkpointing)
    can_suspend = ledger is not None
    state = RunState(task_results=dict(restored_results or {}), decisions=list(approvals.decisions))
    if checkpointing is not None:
        state.revision = checkpointing.writer.revision
        state.writer = checkpointing.writer
    gate = None
    if approvals.dispatch_gate is not None or approvals.approved_dispatch:
        gate = DispatchGate(
            approvals.dispatch_gate,
            run_id=run_id,
            can_suspend=can_suspend,
            approved=dict(approvals.approved_dispatch),
        )
    policy = CallPolicy(
        gate=approvals.tool_gate,
        can_suspend=can_suspend,
        clock=clock,
        fencing_token=lease.fencing_token if lease is not None else None,
        run_attempt=_run_attempt(checkpointing, lease),
    )
    async with ActorSystem() as system:
        writer: ActorRef[CheckpointMessage, SaveOutcome] | None = None
        if checkpointing is not None:
            writer = system.spawn(
                CheckpointActor(checkpointing.writer), name=f"checkpoint:{run_id}"
            )
        agent_refs: dict[str, ActorRef[AgentMessage]] = {}
        if checkpointing is not None and checkpointing.journaling is not None:
            journaling = checkpointing.journaling
        for config in team.agents:
            actor = AgentActor(
                resolve_agent(config), system, run_id=run_id, emit=emit, policy=policy,
                requests=journaling.request_hook if journaling is not None else None,
                observers=journaling.boundary_hook if journaling is not None else None,
                reporters=journaling.facts_hook if journaling is not None else None,
            )  # fmt: skip
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
            journaling=journaling,
            writer=writer,
            ledger=ledger,
            gate=gate,
            budget=budget,
            models={config.name: config.model for config in team.agents},
            scheduler=scheduler,
        )
        run = RunActor(wiring, queue, state, resume, approvals.pending, announced)
        run_ref = system.spawn(run, name=f"run:{run_id}")
        run.bind(run_ref)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if checkpointing is not None:
            emit(_run_started(run_id, checkpointing))
        run_ref.tell(StartRun(done=done))
        lost = await _until_done_or_lost(done, lease)
        if lost is not None:
            state.status = RunOutcome("aborted", str(lost))
            # Another owner holds the run: stop every actor now, mid-turn included. Nothing
            # they could still do would be durable (every write is fenced).
            await system.shutdown(grace=0)
    if state.fatal is not None:
        raise state.fatal
    if checkpointing is not None:
        # The queue's outcome when nothing stopped the run: a failed or unfinished task is
        # ``error``, as the run's result says (``results.run_status``).
        status = state.status or run_status(queue, state.task_results)
        message = status.message if status.code != "ok" else None
        emit(RunFinished(run_id=run_id, status=status.code, message=message))
    ended = state.status.code if state.status is not None else "finished"
    logger.info("run %s: %s (checkpoint revision %d)", run_id, ended, state.revision)
    return state


async def _until_done_or_lost(
    done: asyncio.Future[None], lease: RunLeaseHandle | None
) -> LeaseError | None:
    """Wait for the run to end; return the lease's loss instead if that comes first."""
    if lease is None:
        await done
        return None
    async with asyncio.TaskGroup() as group:
        watcher = group.create_task(lease.wait_lost())
        try:
            either: list[asyncio.Future[Any]] = [done, watcher]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not watcher.done():
                watcher.cancel()
    if done.done():
        done.result()  # the run's own failure, if it stopped on one (``RunActor.receive``)
        return None
    return watcher.result()


def _run_attempt(checkpointing: RunCheckpointing | None, lease: RunLeaseHandle | None) -> int:
    # The snapshot's attempt when checkpointed (a restore's too), else the run record's.
    if checkpointing is not None:
        return checkpointing.identity.attempt
    return lease.attempt if lease is not None else 1


def _run_started(run_id: str, checkpointing: RunCheckpointing) -> RunStarted:
    identity, previous = checkpointing.identity, checkpointing.continued_from
    return RunStarted(
        run_id=run_id,
        attempt=identity.attempt,
        trace_id=identity.trace_id,
        root_span_id=identity.root_span_id,
        continued_from_trace_id=previous.trace_id if previous is not None else None,
        continued_from_span_id=previous.root_span_id if previous is not None else None,
    )

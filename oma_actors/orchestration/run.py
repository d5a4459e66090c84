"""The actors of one orchestrated run: ``RunActor`` (queue, dispatch, saves) and ``AgentActor``.

The RunActor owns the task queue, the in-flight runner states, the pending approvals and every
decision about them. It dispatches ready tasks to their agents up to ``max_concurrency``; each
AgentActor (``agent_actor.py``) spawns one RunnerActor per task. Runners report durable
boundaries to the RunActor, which has the CheckpointActor save the run through the run's one
``RunWriter``, naming the boundary. The writer builds the whole snapshot from the RunActor's own
state (so it is consistent) only when it writes one: a journal-only save appends the boundary's
events and builds none (issue 19). Because the RunActor handles one message at a time and waits
for each save, snapshots are built and written in boundary order.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, assert_never

from oma_actors.actors import Actor
from oma_actors.checkpoint.run_writer import Fenced, Saved
from oma_actors.checkpoint.writer import Save
from oma_actors.domain.messages import ToolResultBlock
from oma_actors.domain.results import RunOutcome
from oma_actors.events import (
    AgentCompleted,
    ApprovalPending,
    BudgetExceeded,
    TaskCompleted,
    TaskFailed,
    TaskSkipped,
    TaskStarted,
)
from oma_actors.orchestration.budget import CostEstimateError, RunBudget, exhausted, task_charges
from oma_actors.orchestration.checkpointing import run_at_boundary, snapshot_of
from oma_actors.orchestration.dispatch_gate import DispatchGate, Go, Halt, Wait
from oma_actors.orchestration.journal_events import record_run_fact
from oma_actors.orchestration.messages import (
    AgentMessage,
    Assign,
    Boundary,
    RunMessage,
    StartRun,
    TaskFinished,
)
from oma_actors.orchestration.prompts import task_prompt
from oma_actors.orchestration.run_facts import (
    Announced,
    ApprovalUsedUp,
    Failed,
    HeldBack,
    Requested,
    Skipped,
    Started,
)
from oma_actors.orchestration.scheduler import DependencyFirst
from oma_actors.orchestration.shared_memory import task_result_key

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from oma_actors.actors import ActorRef
    from oma_actors.agents.facts import Facts
    from oma_actors.agents.runner import Emit, TaskOutcome
    from oma_actors.approvals import DurableApprovalLedger
    from oma_actors.checkpoint.boundaries import Boundary as BoundaryName
    from oma_actors.checkpoint.run_writer import RunWriter, SaveOutcome
    from oma_actors.checkpoint.writer import CheckpointMessage
    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.inflight import BoundaryKind, RunnerState
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.domain.tasks import TaskState
    from oma_actors.orchestration.checkpointing import RunCheckpointing
    from oma_actors.orchestration.journaling import RunJournaling
    from oma_actors.orchestration.queue import TaskQueue
    from oma_actors.orchestration.run_facts import RunFact
    from oma_actors.orchestration.shared_memory import SharedMemory


logger = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class RunState:
    """What a run has produced so far, read by the facade when the run ends."""

    task_results: dict[str, AgentRunResult] = field(default_factory=dict)
    # Task id -> the agent whose result it is; ``results.team_result`` files every task result
    # under it (the task's assignee when missing: a restored result), merging an agent's.
    result_agents: dict[str, str] = field(default_factory=dict)
    revision: int = 0
    status: RunOutcome | None = None
    pending_approvals: list[ApprovalRequest] = field(default_factory=list)
    decisions: list[ApprovalDecision] = field(default_factory=list)
    fatal: Exception | None = None
    writer: RunWriter | None = None  # the run's writer, for its save counts
    # Tasks whose cost the estimator could not give: OMA's accounting throws before it adds
    # them (budget.ts 184-198), so they are never charged, nor priced again (the synthesis's
    # charge, ``goal_flow.charge_synthesis``, leaves them out too).
    unpriced: set[str] = field(default_factory=set)

    def charged_results(self) -> dict[str, AgentRunResult]:
        """The task results charged to the run's budget: all but those never priced."""
        return {
            task: result for task, result in self.task_results.items() if task not in self.unpriced
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunWiring:
    """Everything a RunActor works with besides its queue."""

    run_id: str
    agents: Mapping[str, ActorRef[AgentMessage]]
    memory: SharedMemory | None
    max_concurrency: int
    emit: Emit
    checkpointing: RunCheckpointing | None = None
    journaling: RunJournaling | None = None  # the checkpointing's, when it has one
    writer: ActorRef[CheckpointMessage, SaveOutcome] | None = None
    ledger: DurableApprovalLedger | None = None
    gate: DispatchGate | None = None
    budget: RunBudget | None = None
    models: Mapping[str, str] = field(default_factory=dict)  # agent name -> model, for costs
    scheduler: DependencyFirst | None = None  # default: a new one over the agents


class RunActor(Actor[RunMessage, bool | None]):
    """Owns the queue of one run and dispatches it.

    Ready tasks go out up to the concurrency limit (spec TQ-08); a completed task is written to
    shared memory and saved before its dependents start or anyone hears of it (SV-01, EV-01);
    approvals suspend the run only once their request is durable, while the rest drains
    (AP-19..AP-27).
    """

    def __init__(
        self,
        wiring: RunWiring,
        queue: TaskQueue,
        state: RunState,
        resume: Mapping[str, tuple[str, RunnerState]] | None = None,
        pending: Mapping[str, ApprovalRequest] | None = None,
        announced: Collection[str] | None = None,
    ) -> None:
        self._w = wiring
        self._queue = queue
        self._state = state
        self._scheduler = wiring.scheduler or DependencyFirst(list(wiring.agents))
        # The latest runner state of every task in flight (task id -> (agent, state)): what the
        # next snapshot records for it. Restored entries wait here until re-dispatched.
        self._runner_states: dict[str, tuple[str, RunnerState]] = dict(resume or {})
        self._resume = {task_id: state for task_id, (_, state) in self._runner_states.items()}
        self._pending: dict[str, ApprovalRequest] = dict(pending or {})
        self._running: dict[str, str] = {}  # task id -> agent, for dispatched tasks
        # Completed tasks whose TaskCompleted was emitted; persisted so that a completion saved
        # just before a crash is still announced after the restore (at-least-once events).
        self._announced: set[str] = (
            set(announced)
            if announced is not None
            else {task.id for task in queue.with_status("completed")}
        )
        self._stop: Halt | Wait | None = None
        self._over_budget = False  # BudgetExceeded was reported (once, as OMA's flag has it)
        self._done: asyncio.Future[None] | None = None
        self._self: ActorRef[RunMessage, bool | None] | None = None

    def bind(self, ref: ActorRef[RunMessage, bool | None]) -> None:
        """Give the actor its own reference (agents and runners reply to it)."""
        self._self = ref

    async def receive(self, message: RunMessage) -> bool | None:
        """Start the run, record a boundary or a task outcome, then dispatch what is ready.

        A failure here (a bug in a save, a dispatch or a fold: not a refused save, which is an
        outcome) stops this actor; the run's caller gets it from ``done``, where it would
        otherwise wait for an end nobody is left to report.
        """
        try:
            return await self._receive(message)
        except Exception as exc:
            if self._done is not None and not self._done.done():
                self._done.set_exception(exc)
            raise

    async def _receive(self, message: RunMessage) -> bool | None:
        match message:
            case StartRun(done=done):
                self._done = done
                self._announce_restored()
                await self._save("admission")  # decision D3, best-effort
                # A restore starts with its completed results (and a decomposition) charged: a
                # run already over budget then halts before its first dispatch, as the fresh
                # run did after the task that took it over. A fresh start is within budget.
                self._spend(self._over())
            case Boundary(task_id=task_id, agent=agent, state=state, kind=kind, facts=facts):
                return await self._boundary(task_id, agent, state, kind, facts)
            case TaskFinished(outcome=outcome):
                await self._finish(outcome)
            case _:
                assert_never(message)
        await self._dispatch()
        return None

    def _announce_restored(self) -> None:
        for task in self._queue.with_status("completed"):
            result = self._state.task_results.get(task.id)
            if task.id in self._announced or result is None:
                continue
            agent = task.assignee or ""
            self._report(Announced(task_id=task.id, agent=agent))
            self._w.emit(
                TaskCompleted(
                    run_id=self._w.run_id, task_id=task.id, title=task.title, agent=agent,
                    result=result,
                )
            )  # fmt: skip
            self._announced.add(task.id)

    async def _boundary(
        self, task_id: str, agent: str, state: RunnerState, kind: BoundaryKind, facts: Facts
    ) -> bool:
        if kind == "attempt_reset":
            # Spec TQ-10: a retried task starts a fresh conversation, so its old state goes.
            self._runner_states.pop(task_id, None)
            return await self._save(kind, task_id)
        self._runner_states[task_id] = (agent, state)
        cp = self._w.checkpointing
        if facts and cp is not None and cp.journaling is not None:
            # The runner's facts are recorded as the run adopts the state they made, so the
            # next snapshot's watermark covers exactly the facts its entries hold (JR-08).
            cp.journaling.record(task_id, agent, facts)
        for item in state.pending:
            # An approved call that committed consumes its request (spec AP-34).
            if item.commit is not None and item.approval_request is not None:
                self._pending.pop(item.approval_request.id, None)
        if kind == "tool_commit":  # every call a tool ran ends in its own commit boundary
            await self._see_memory_writes()
        if kind != "approval_requested":
            return await self._save(kind, task_id, _committed_calls(state))
        new = [
            item.approval_request
            for item in state.awaiting_approval
            if item.approval_request is not None and item.approval_request.id not in self._pending
        ]
        return await self._publish(new, task_id)

    async def _see_memory_writes(self) -> None:
        """Journal-first, after a tool ran: a change of the shared memory no event told of (a
        tool writing to the store itself) makes this boundary a snapshot, which holds it. Else
        a restore would put back the older snapshot's memory under the tool's replayed result.
        """
        cp, memory = self._w.checkpointing, self._w.memory
        journaling = cp.journaling if cp is not None else None
        if journaling is None or memory is None or not journaling.journal_first:
            return  # OMA's mode: every boundary's snapshot holds the memory as it is
        if cp is not None and cp.embed_memory and await memory.changed_since_snapshot():
            journaling.recorder.uncarried("the shared memory changed while a tool ran")

    async def _publish(self, requests: list[ApprovalRequest], task_id: str | None = None) -> bool:
        """Suspend on ``requests``: strict save, then the ledger rows, then the events.

        Spec AP-19: a request is announced only once it is durable, both in the checkpoint and
        in the ledger, so a reviewer never sees a request a restore would not know about.
        """
        ledger = self._w.ledger
        if ledger is None or self._w.writer is None:
            return False
        for request in requests:
            self._pending[request.id] = request
        if not await self._save("approval_requested", task_id):
            for request in requests:
                self._pending.pop(request.id, None)
            return False
        for request in requests:
            # The row comes after the checkpoint: a crash in between is repaired on restore.
            await ledger.ensure_request(request)
            self._report(Requested(request=request))
            self._w.emit(ApprovalPending(run_id=self._w.run_id, request=request))
        return True

    async def _save(
        self, boundary: BoundaryName, task_id: str | None = None, committed: tuple[str, ...] = ()
    ) -> bool:
        """Save the run as it is now, as ``boundary``; answers whether the snapshot is durable.

        Strictness and the outcome's events belong to the run's ``RunWriter``.
        """
        cp, writer = self._w.checkpointing, self._w.writer
        if cp is None or writer is None:
            return False
        in_flight = self._runner_states

        async def build(watermark: int | None) -> CheckpointSnapshot:
            # Called by the writer only when it writes the whole snapshot (issue 19). This
            # actor waits for the outcome meanwhile, so it reads the state of this boundary.
            return await snapshot_of(
                cp,
                queue=self._queue,
                memory=self._w.memory,
                results=self._state.task_results,
                in_flight=in_flight,
                watermark=watermark,
                pending_approvals=self._pending_requests(),
                decisions=self._state.decisions,
                announced=self._announced,
            )

        run = run_at_boundary(cp, in_flight=in_flight, build=build)
        outcome = await writer.ask(
            Save(run=run, boundary=boundary, task_id=task_id, committed=committed)
        )
        if isinstance(outcome, Saved):
            self._state.revision = outcome.revision
            return True
        if isinstance(outcome, Fenced):
            # Another owner holds the run (D11). execute_queue stops every actor as soon as the
            # loss latches, which it did inside this write; park until then, so the runner that
            # asked cannot take one more step (run a tool, call the model) before it is stopped.
            await asyncio.Event().wait()
        return False

    def _pending_requests(self) -> list[ApprovalRequest]:
        """Every outstanding request: the pending map plus in-flight calls not yet committed.

        Decided requests stay listed until their boundary is consumed, because the in-flight
        call that carries one must be listed too (spec SV-03, CK-16).
        """
        found = dict(self._pending)
        for _, state in self._runner_states.values():
            for item in state.pending:
                if item.approval_request is not None and item.commit is None:
                    found.setdefault(item.approval_request.id, item.approval_request)
        return list(found.values())

    async def _dispatch(self) -> None:
        assert self._self is not None
        # Ranked only when a task can go out (this runs after every message of the run).
        can_start = self._stop is None and len(self._running) < self._w.max_concurrency
        ready = self._scheduler.rank(self._queue.ready(), self._queue.tasks) if can_start else []
        if self._w.gate is not None:
            ready = self._w.gate.approved_first(ready)
        for task in ready:
            if self._stop is not None or len(self._running) >= self._w.max_concurrency:
                break
            agent = self._choose_agent(task)
            waiting, task = task, self._queue.assign(task.id, agent)
            if self._w.gate is not None:
                verdict = await self._w.gate.check(task, self._publish)
                if not isinstance(verdict, Go):
                    if task is not waiting:  # assigned, not started: no event says so
                        self._report(HeldBack(task_id=task.id, agent=agent))
                    self._stop = verdict
                    break
                consumed = verdict.consumed
                if consumed is not None and self._pending.pop(consumed, None) is not None:
                    self._report(ApprovalUsedUp(request_id=consumed))
            self._start(task, agent)
        if not self._running and self._done is not None and not self._done.done():
            await self._conclude()

    def _report(self, fact: RunFact) -> None:
        """Record a change of the queue or the approvals as it happens (D14), before its event."""
        record_run_fact(self._w.journaling, fact)

    def _start(self, task: TaskState, agent: str) -> None:
        assert self._self is not None
        started = self._queue.start(task.id, agent)
        self._running[task.id] = agent
        self._report(Started(task_id=task.id, agent=agent, updated_at=started.updated_at))
        logger.info("run %s: task %r started on %s", self._w.run_id, task.title, agent)
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

    async def _conclude(self) -> None:
        """Nothing runs any more: settle the run (drain-then-skip, or stay suspended)."""
        assert self._done is not None
        match self._stop:
            case Wait(status=status):
                await self._save("run_suspended")  # best-effort: the suspension is durable
                self._state.status = status
            case Halt(status=status, reason=reason):
                self._skip(reason)
                self._state.status = status
            case None:
                # Whatever is left can never become ready (a restored task blocked on a failed or
                # skipped dependency): it stays as it is and the run ends ``error``, as OMA's loop
                # just stops (task-execution.ts 831-832) and its result counts it unfinished.
                pass
        decided = {decision.request_id for decision in self._state.decisions}
        self._state.pending_approvals = [
            request for request in self._pending_requests() if request.id not in decided
        ]
        self._done.set_result(None)

    def _skip(self, reason: str) -> None:
        for task in self._queue.skip_remaining(reason):
            self._report(Skipped(task_id=task.id, reason=reason))
            self._w.emit(
                TaskSkipped(run_id=self._w.run_id, task_id=task.id, title=task.title, reason=reason)
            )

    def _choose_agent(self, task: TaskState) -> str:
        if task.assignee is not None:
            return task.assignee
        return self._scheduler.next_agent()

    async def _finish(self, outcome: TaskOutcome) -> None:
        task_id = outcome.task_id or ""
        agent = self._running.pop(task_id)
        if outcome.fatal is not None:
            self._state.fatal = self._state.fatal or outcome.fatal
            self._stop = Halt(
                reason=f"Skipped: run failed — {outcome.fatal}",
                status=RunOutcome("error", str(outcome.fatal)),
            )
            return
        # OMA keeps every result, a suspended one too (task-execution.ts 1357), and prices it
        # before it finishes the task (1375-1391): a restore does not count a suspended task's
        # tokens twice (a snapshot holds completed results only; the resumed result replaces
        # this one). A cost the estimator cannot give fails the task alone (1392-1415).
        self._state.task_results[task_id] = outcome.result
        self._state.result_agents[task_id] = agent
        exceeded: BudgetExceeded | None = None
        unpriced: str | None = None
        try:
            exceeded = self._over()
        except CostEstimateError as exc:
            unpriced = str(exc)
        if outcome.suspended and unpriced is None:
            self._spend(exceeded, suspending=True)
            # Spec AP-27: the task stays in progress with its in-flight entry; others drain.
            # A budget stop or a denied dispatch yields to it (``YIELDS_TO_SUSPENSION``).
            if not isinstance(self._stop, Halt) or self._stop.status.code in YIELDS_TO_SUSPENSION:
                self._stop = Wait(status=RunOutcome("suspended", TOOL_SUSPENSION))
            # OMA still reports the agent's (suspended) result (task-execution.ts 1414-1431).
            self._w.emit(
                AgentCompleted(
                    run_id=self._w.run_id, agent=agent, task_id=task_id, result=outcome.result
                )
            )
            return
        task = self._queue.get(task_id)
        result = outcome.result
        run_id = self._w.run_id
        if unpriced is not None:  # the task fails with the estimator's message; the run goes on
            self._state.unpriced.add(task_id)
            result = replace(result, success=False, output=unpriced)
            self._state.task_results[task_id] = result
        self._runner_states.pop(task_id, None)  # spec RN-13: a finished task leaves no entry
        logger.info(
            "run %s: task %r %s (%d turns)", run_id, task.title,
            "completed" if result.success else "failed", result.turns,
        )  # fmt: skip
        if not result.success:
            self._fail(task_id, result.output)
            self._w.emit(AgentCompleted(run_id=run_id, agent=agent, task_id=task_id, result=result))
            self._spend(exceeded)
            return
        # Spec SV-01 / EV-01: shared memory, turn, queue, save, and only then the events, so a
        # dependent never starts (and no observer hears of the completion) before it is durable.
        memory = self._w.memory
        if memory is not None:
            await memory.write(agent, task_result_key(task_id), result.output)
            memory.advance_turn()
        self._queue.complete(task_id, result.output)
        await self._save("task_completed", task_id)
        self._report(Announced(task_id=task_id, agent=agent))
        self._w.emit(
            TaskCompleted(
                run_id=run_id, task_id=task_id, title=task.title, agent=agent, result=result
            )
        )
        self._announced.add(task_id)
        self._w.emit(AgentCompleted(run_id=run_id, agent=agent, task_id=task_id, result=result))
        self._spend(exceeded)

    def _fail(self, task_id: str, message: str) -> None:
        """Fail a task with ``message`` and cascade; report and announce each failure.

        A failed task waits for no reviewer: a request its calls published (a suspended task
        that failed when it was priced) is no longer pending; its ledger row stays, and
        deciding it changes nothing.
        """
        for request_id, request in list(self._pending.items()):
            if request.content.get("taskId") == task_id:
                del self._pending[request_id]
        cascade = self._queue.fail(task_id, message)
        for failed in (self._queue.get(task_id), *cascade):
            error = failed.result or ""
            self._report(Failed(task_id=failed.id, agent=failed.assignee, error=error))
            self._w.emit(
                TaskFailed(
                    run_id=self._w.run_id,
                    task_id=failed.id,
                    title=failed.title,
                    agent=failed.assignee,
                    error=error,
                )
            )

    def _over(self) -> BudgetExceeded | None:
        """What the results so far passed of the budget, if it is still to be reported (by
        ``_spend``, once the task's end is durable: EV-01). It names the result's task and
        assignee that took the run over (OMA's ``recordRunUsage`` names the task it charges,
        task-execution.ts 1381-1387): the one just finished, or at a restore's start the
        restored one.

        A suspending or halted run (``Wait``, ``Halt``) is still charged, as OMA charges every
        result it drains (task-execution.ts 1380-1391 run whatever the loop's state): a task
        that finishes after a suspension, a denied dispatch or a failed gate and passes the
        budget is reported, a suspended one too.

        Raises:
            CostEstimateError: the estimator could not price a result.
        """
        budget = self._w.budget
        if budget is None or self._over_budget:
            return None
        charges = task_charges(
            self._state.charged_results(),
            lambda task: self._queue.get(task).assignee,
            self._w.models,
        )
        return budget.check(charges, run_id=self._w.run_id)

    def _spend(self, exceeded: BudgetExceeded | None, *, suspending: bool = False) -> None:
        """Report ``exceeded`` and stop the run: drain, then skip the rest.

        A run already halted (a denied dispatch, a failed gate) keeps its status and its skip
        reason (spec TQ-07), where OMA's status becomes ``budget_exhausted``.

        ``suspending`` (the task charged suspends), or a run already suspending: the suspension
        stands, as in OMA, whose loop suspends before it stops (task-execution.ts 796-807):
        nothing is skipped and the suspended task can still resume. The run ends ``suspended``
        (spec AP-27), where OMA's ends ``budget_exhausted`` when the charge came after the
        suspension (budget.ts 207 sets the run's status over it; its suspended branch,
        task-execution.ts 1418-1422, sets it back only for a task that suspends after).
        """
        if exceeded is None:
            return
        self._over_budget = True
        self._w.emit(exceeded)
        if suspending or self._stop is not None:
            # A stop already decided stands (spec TQ-07: a forced status wins; AP-27): OMA
            # would write ``budget_exhausted`` over it (budget.ts 207), its skip reason kept.
            return
        reason, status = exhausted(exceeded)
        self._stop = Halt(reason=reason, status=status)


TOOL_SUSPENSION = "Durable approval required before task execution can continue."
"""The status message of a run a tool call's approval suspended (OMA's, task-execution.ts)."""

YIELDS_TO_SUSPENSION = frozenset({"budget_exhausted", "rejected"})
"""The stops a later tool-call suspension stands over: a spent budget and a dispatch the gate
denied. OMA's suspended branch sets the run's status after them and its loop asks whether to
suspend before whether to stop (task-execution.ts 796-806, 974-975, 1418-1422), so nothing is
skipped: a skipped task would leave its approval request pending for a call that never resumes.
An error (a gate that failed, a fatal one) still stops the run."""


def _committed_calls(state: RunnerState) -> tuple[str, ...]:
    """The tool calls whose results a save of ``state`` makes durable.

    While the turn's calls are pending, those with a commit record; once the results message
    is written (``awaiting_model``), the calls it answers. A host waiting to forget a call it
    executed learns it from either save, so one failed commit save is healed by the next.
    """
    committed = [item.call.id for item in state.pending if item.commit is not None]
    if not state.pending and state.conversation:
        last = state.conversation[-1]
        if last.role == "user":
            committed.extend(
                block.tool_use_id for block in last.content if isinstance(block, ToolResultBlock)
            )
    return tuple(committed)

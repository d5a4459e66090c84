"""The restore flow: continue a checkpointed run where it stopped (spec 10, D4, D12)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.agents.runner import resolve_agent
from oma_actors.checkpoint.fork import clear_fork_marks
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.run_writer import RunWriter, Saved
from oma_actors.clock import to_iso
from oma_actors.domain.results import RunOutcome, TeamRunResult
from oma_actors.domain.tasks import PlanArtifact
from oma_actors.errors import (
    CheckpointNotFoundError,
    DurableApprovalError,
    LeaseError,
    StoreError,
)
from oma_actors.events import ApprovalPending, SynthesisFailed
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.journal.options import JournalOptions
from oma_actors.journal.ref import depends_on_journal, open_journal_ref
from oma_actors.keyspace import checkpoint_key
from oma_actors.orchestration.approval_restore import Reconciled, reconcile_approvals
from oma_actors.orchestration.checkpointing import RunCheckpointing, identity_json, new_identity
from oma_actors.orchestration.coordinator import (
    coordinator_results,
    default_coordinator,
    synthesize,
    synthesizes_after,
)
from oma_actors.orchestration.execute import RunApprovals, execute_queue, ledger_for_store
from oma_actors.orchestration.flows import (
    claim_if,
    plan_tasks,
    plan_view,
    run_task_list,
    save_synthesis,
    team_memory,
)
from oma_actors.orchestration.goal_flow import charge_synthesis
from oma_actors.orchestration.journal_calls import ConversationJournal
from oma_actors.orchestration.journal_events import (
    ends_on_raise,
    finish_journal,
    record_resumed,
    start_restore,
    watch_memory,
)
from oma_actors.orchestration.journal_setup import (
    OnDamagedJournal,
    fold_restored_tail,
    forgets_before,
    safe_tools,
)
from oma_actors.orchestration.journaling import RunJournaling
from oma_actors.orchestration.ownership import owning, settle
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.restore_plan import RestorePlan, plan_restore
from oma_actors.orchestration.results import run_status, team_result
from oma_actors.orchestration.run import RunState
from oma_actors.orchestration.shared_memory import restore_memory

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.agents.config import AgentConfig, Team
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.domain.tasks import Task
    from oma_actors.orchestration.flows import FlowContext
    from oma_actors.orchestration.options import ResolvedCheckpoint
    from oma_actors.runs import RunLeaseHandle


async def restore_run(
    team: Team,
    tasks_or_plan: Sequence[Task] | PlanArtifact | None,
    *,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint | None,
    coordinator: AgentConfig | None,
    on_damaged_journal: OnDamagedJournal = "refuse",
) -> TeamRunResult:
    """Resume from the latest snapshot, or run ``tasks_or_plan`` fresh when there is none.

    Raises:
        JournalUnavailableError: the snapshot was saved journal-first, no journal was given and
            the one it names cannot be opened (nothing written).
        JournalDamagedError: its journal's tail fails a fold check and ``on_damaged_journal``
            is ``"refuse"`` (nothing written).
    """
    snapshot = None
    if resolved is not None:
        checkpoint = Checkpoint(resolved.store, key=resolved.key, run_id=resolved.run_id)
        snapshot = await checkpoint.load_latest()
    if snapshot is None:
        if isinstance(tasks_or_plan, PlanArtifact):
            return await run_task_list(
                team,
                plan_tasks(tasks_or_plan),
                ctx=ctx,
                resolved=resolved,
                mode="runFromPlan",
                goal=tasks_or_plan.goal,
            )
        if tasks_or_plan:
            return await run_task_list(team, list(tasks_or_plan), ctx=ctx, resolved=resolved)
        # Decision D12 (replacing D7's silent no-op): nothing to restore and nothing to run is
        # an error the caller must see; it still writes nothing at all.
        raise CheckpointNotFoundError(resolved.key if resolved else checkpoint_key(None))
    assert resolved is not None
    with claim_if(resolved):
        if ctx.journal is not None or not depends_on_journal(snapshot):
            return await _continue(
                team, snapshot, ctx=ctx, resolved=resolved, coordinator=coordinator,
                on_damaged=on_damaged_journal,
            )  # fmt: skip
        # Decision D15: a journal-first snapshot is not the whole saved state (its dispatch and
        # commit records are in the journal), so it never restores without it. Opening it
        # reads and writes nothing: a refusal here leaves every store as it was.
        opened = open_journal_ref(adopt_journal_fields(snapshot).journal_ref, resolved.store)
        try:
            return await _continue(
                team, snapshot, ctx=replace(ctx, journal=JournalOptions(opened)),
                resolved=resolved, coordinator=coordinator, on_damaged=on_damaged_journal,
            )  # fmt: skip
        finally:
            await opened.close()  # we opened it, so we close it (a caller's journal stays open)


async def _continue(
    team: Team,
    snapshot: CheckpointSnapshot,
    *,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint,
    coordinator: AgentConfig | None,
    on_damaged: OnDamagedJournal,
) -> TeamRunResult:
    # A fork's child (D17): the calls its fork marked dispatched only for want of a team are
    # re-runnable when their tool is not unsafe (D1), before the tail marks what it started.
    snapshot = clear_fork_marks(snapshot, safe_tools(team))
    if ctx.journal is not None:
        # Spec 17.3: the tail above the snapshot's watermarks is folded in first (JR-11: only
        # a v5 snapshot has one); a tail failing a check is discarded whole (D6), or refused
        # when the snapshot was saved journal-first (D15).
        snapshot, seen = await fold_restored_tail(
            snapshot, ctx.journal, team, ctx.emit, on_damaged=on_damaged
        )
    else:
        seen = 0
    plan = plan_restore(snapshot, team, resolved.run_id, clock=ctx.clock)
    async with AsyncExitStack() as stack:
        try:
            lease = await stack.enter_async_context(owning(ctx.run_store, plan.run_id, ctx.emit))
        except LeaseError as exc:
            if exc.code == "RUN_ALREADY_TERMINAL" and plan.finished:
                # Decision D4 under a run store: a completed run is read back, never re-owned.
                return _finished(snapshot, plan)
            raise
        result = await _continue_owned(
            team, snapshot, plan, ctx, resolved, coordinator, lease, seen=seen,
            on_damaged=on_damaged,
        )  # fmt: skip
        await settle(lease, result)
    return result


def _finished(snapshot: CheckpointSnapshot, plan: RestorePlan) -> TeamRunResult:
    """The stored results of a finished run, with no model call and no write (D4)."""
    return team_result(
        run_id=plan.run_id,
        attempt=snapshot.attempt,
        queue=plan.queue,
        state=_restored_state(plan),
        extra_agent_results=coordinator_results(None, snapshot.synthesis),
        carried_usage=snapshot.planning_usage,
    )


def _restored_state(plan: RestorePlan) -> RunState:
    """What the restored run had produced: its completed tasks' results, by their agents."""
    return RunState(task_results=dict(plan.results), result_agents=dict(plan.agents))


async def _continue_owned(
    team: Team,
    snapshot: CheckpointSnapshot,
    plan: RestorePlan,
    ctx: FlowContext,
    resolved: ResolvedCheckpoint,
    coordinator: AgentConfig | None,
    lease: RunLeaseHandle | None,
    *,
    seen: int = 0,
    on_damaged: OnDamagedJournal = "refuse",
) -> TeamRunResult:
    reconciled = await reconcile_approvals(
        snapshot, ledger_for_store(resolved.store), plan.run_id, plan.resume
    )
    writer = _writer(resolved, plan, snapshot, ctx, lease)
    identity = new_identity(plan.run_id, plan.attempt, continues=snapshot.identity)
    journaling = None
    appended = False
    if ctx.journal is not None:
        journaling = await RunJournaling.open(
            ctx.journal, run_id=plan.run_id, attempt=plan.attempt, emit=ctx.emit,
            snapshot=snapshot, seen_through=seen,
        )  # fmt: skip
        appended = _admits_by_append(journaling, snapshot, resolved, lease, on_damaged)
        start_restore(
            journaling,
            goal=snapshot.goal,
            decisions=reconciled.decisions,
            known=snapshot.approval_decisions,
            identity=identity_json(identity) if appended else None,
        )
    async with ends_on_raise(journaling):
        # OMA's restore holds the completed tasks' results and no decomposition (orchestrator.ts
        # 2283, 3187-3210): the coordinator's entry is a synthesis (a stored one, decision D4), or
        # none. The decomposition's tokens stay charged to the run (``carried_usage``).
        extra = coordinator_results(None, snapshot.synthesis)
        stopped = await _settle_approvals(snapshot, plan, reconciled, writer, ctx, extra)
        if stopped is not None:
            # Attached only to go on: these outcomes write as without a journal (if at all).
            await finish_journal(journaling, stopped.status)
            return stopped
        memory = team_memory(team)
        if memory is not None:
            if snapshot.shared_memory is not None:
                await restore_memory(memory, snapshot.shared_memory)
                if journaling is not None and snapshot.shared_memory.get("entries"):
                    # Restored entries get a new createdAt (as OMA's): no event carries that.
                    journaling.recorder.uncarried(
                        "shared_memory changed: the restore rewrote its entries"
                    )
            elif snapshot.turn_count is not None:
                memory.turn_count = snapshot.turn_count
        watch_memory(journaling, memory)
        if journaling is not None:
            journaling.attach(writer, team)
            if appended and writer.journal is not None:
                # The restored state is the writer's view: the admission appends run/start.
                writer.journal.seed(snapshot, identity)
                record_resumed(journaling, plan.queue, plan.resume, snapshot.tasks)
        checkpointing = RunCheckpointing(
            continued_from=snapshot.identity,
            journaling=journaling,
            writer=writer,
            mode=snapshot.mode,
            identity=identity,
            goal=snapshot.goal,
            embed_memory=not resolved.reuses_shared_store,
            metadata=snapshot.metadata,
            synthesis=snapshot.synthesis,
            planning_usage=snapshot.planning_usage,
            source=snapshot.source,
            clock=ctx.clock,
        )
        lead_config = coordinator or default_coordinator(team)
        if ctx.budget is not None and snapshot.planning_usage is not None:
            # The decomposition stays charged to the run across restores, as the task results do.
            budget = ctx.budget.charged(snapshot.planning_usage, lead_config.model)
            ctx = replace(ctx, budget=budget)
        state = await execute_queue(
            team,
            plan.queue,
            run_id=plan.run_id,
            memory=memory,
            max_concurrency=ctx.max_concurrency,
            emit=ctx.emit,
            checkpointing=checkpointing,
            resume=reconciled.resume,
            restored_results=plan.results,
            budget=ctx.budget,  # charged with the restored results too: it continues (not LM-16)
            approvals=RunApprovals(
                dispatch_gate=ctx.on_task_dispatch,
                tool_gate=ctx.on_tool_call,
                approved_dispatch=reconciled.approved_dispatch,
                pending={
                    request.id: request
                    for request in snapshot.pending_approvals
                    if request.scope != "plan" and request not in reconciled.rejected
                },
                decisions=tuple(reconciled.decisions),
            ),
            announced=snapshot.announced,
            clock=ctx.clock,
            lease=lease,
        )
        for task_id, agent in plan.agents.items():  # the restored results, by their agents (OR-09)
            state.result_agents.setdefault(task_id, agent)
        status: RunOutcome | None = None
        extra = {}  # no synthesis yet: no coordinator entry (OMA sets one only on success)
        if snapshot.mode == "runTeam" and synthesizes_after(state.status):
            if plan.finished and snapshot.synthesis is not None:
                # Decision D4: no model call.
                extra = coordinator_results(None, snapshot.synthesis)
            else:
                # Journaled as on the live path: the coordinator's calls, then run/end.
                synthesis = await _restored_synthesis(
                    team, snapshot.goal or "", plan.queue, lead_config, ctx, plan.run_id, journaling
                )
                if synthesis is None:
                    # Spec CD-09: a failed restored synthesis attaches no coordinator entry.
                    status = RunOutcome("error", "synthesis failed on restore")
                else:
                    synthesis, status = charge_synthesis(
                        team, plan.queue, state, synthesis, lead_config.model, ctx, plan.run_id
                    )
                    extra = coordinator_results(None, synthesis)
                    await save_synthesis(
                        checkpointing,
                        queue=plan.queue,
                        memory=memory,
                        state=state,
                        synthesis=synthesis,
                    )
        # How the queue stopped (a rejection, a failed gate) stands over the synthesis's outcome.
        status = state.status or status
    await finish_journal(journaling, status or run_status(plan.queue, state.task_results))
    return team_result(
        run_id=plan.run_id,
        attempt=plan.attempt,
        queue=plan.queue,
        state=state,
        extra_agent_results=extra,
        status=status,
        carried_usage=snapshot.planning_usage,
    )


async def _settle_approvals(
    snapshot: CheckpointSnapshot,
    plan: RestorePlan,
    reconciled: Reconciled,
    writer: RunWriter,
    ctx: FlowContext,
    extra: Mapping[str, AgentRunResult],
) -> TeamRunResult | None:
    """The outcomes that end a restore before any work (spec AP-31), or ``None`` to go on.

    In order: an undecided request suspends; a newly rejected boundary skips the rest, is saved
    and rejects; a rejection already saved rejects again; an approved plan-only run returns
    its plan. ``extra``: the coordinator's entry, which each outcome reports; each also counts
    the decomposition's tokens (``carried_usage``).
    """
    state = _restored_state(plan)
    state.decisions = list(reconciled.decisions)
    carried = snapshot.planning_usage
    as_saved = TaskQueue(snapshot.tasks, clock=ctx.clock)
    if reconciled.unresolved:
        # Calling restore early is harmless: no work, no save, no gate. The requests are
        # announced again: a crash may have come between their ledger row and their event.
        for request in reconciled.unresolved:
            ctx.emit(ApprovalPending(run_id=plan.run_id, request=request))
        state.pending_approvals = list(reconciled.unresolved)
        state.status = RunOutcome("suspended", "Durable approval decision pending.")
        return team_result(
            run_id=plan.run_id, attempt=snapshot.attempt, queue=as_saved, state=state,
            extra_agent_results=extra, carried_usage=carried,
        )  # fmt: skip
    if reconciled.rejected:
        plan.queue.skip_remaining("Skipped: durable approval rejected.")
        rejected = {request.id for request in reconciled.rejected}
        # The terminal state is the stored one with the rejection applied: shared memory, turn
        # count, completed results and our own fields carry over untouched.
        terminal = replace(
            snapshot,
            created_at=to_iso(ctx.clock.now()),
            identity=new_identity(plan.run_id, plan.attempt, continues=snapshot.identity),
            tasks=tuple(plan.queue.tasks),
            in_flight=(),
            # As OMA, the rejected request goes; so does a tool call's, whose invocation (its
            # in-flight entry) goes here: kept, it made the next restore refuse it as stale
            # instead of rejecting again (OMA keeps the entry, and its next restore throws).
            pending_approvals=tuple(
                r
                for r in snapshot.pending_approvals
                if r.id not in rejected and r.scope != "tool_call"
            ),
            approval_decisions=tuple(reconciled.decisions),
        )
        outcome = await writer.save(terminal, boundary="approval_rejected")
        if not isinstance(outcome, Saved):
            # Strict: a rejection reported as final must be what a later restore reads.
            raise StoreError(f"the approval rejection could not be saved: {outcome.error}")
        state.status = RunOutcome("rejected", "Durable approval rejected.")
        return team_result(
            run_id=plan.run_id, attempt=plan.attempt, queue=plan.queue, state=state,
            extra_agent_results=extra, carried_usage=carried,
        )  # fmt: skip
    if reconciled.already_rejected:
        state.status = RunOutcome("rejected", "Durable approval rejected.")
        return team_result(
            run_id=plan.run_id, attempt=snapshot.attempt, queue=as_saved, state=state,
            extra_agent_results=extra, carried_usage=carried,
        )  # fmt: skip
    if reconciled.plan_only:
        if not snapshot.goal:
            raise DurableApprovalError(
                "APPROVAL_INTEGRITY_ERROR", "an approved plan-only checkpoint has no goal"
            )
        return team_result(
            run_id=plan.run_id,
            attempt=snapshot.attempt,
            queue=plan_view(as_saved),
            state=state,
            extra_agent_results=extra,
            plan_only=True,
            carried_usage=carried,
        )
    return None


def _admits_by_append(
    journaling: RunJournaling,
    snapshot: CheckpointSnapshot,
    resolved: ResolvedCheckpoint,
    lease: RunLeaseHandle | None,
    on_damaged: OnDamagedJournal,
) -> bool:
    """Whether the restored attempt's admission is its ``run/start`` append (issue 19, D14).

    Only journal-first, and only where the restored state is exactly what a later restore
    folds: the snapshot depends on its journal and its tail folded whole (``refuse`` raised
    otherwise), the journal keeps what the store keeps, and no lease (a leased run's JSONL
    appends cannot carry the fence, D11; its admission stays a fenced snapshot), and no
    conversation restored with its final answer already given (known hole: its admission
    compacts, as before). Decided
    before ``run/start`` is recorded: its identity is carried only when the fold is to take it.
    """
    # A final answer the journal saved (``terminal``) whose completion was lost is finished
    # by the restore's first steps, not by an append the fold takes: that admission compacts.
    answered = any(entry.state.phase == "completed" for entry in snapshot.in_flight)
    return (
        journaling.durable
        and not answered
        and lease is None
        and on_damaged == "refuse"
        and depends_on_journal(snapshot)
        and not forgets_before(journaling.recorder.journal, resolved.store)
    )


def _writer(
    resolved: ResolvedCheckpoint,
    plan: RestorePlan,
    snapshot: CheckpointSnapshot,
    ctx: FlowContext,
    lease: RunLeaseHandle | None,
) -> RunWriter:
    """The restored run's one writer, continuing the stored snapshot's revision."""
    checkpoint = Checkpoint(resolved.store, key=resolved.key, run_id=plan.run_id)
    return RunWriter(checkpoint, emit=ctx.emit, revision=snapshot.revision, fence=lease)


async def _restored_synthesis(
    team: Team,
    goal: str,
    queue: TaskQueue,
    coordinator: AgentConfig,
    ctx: FlowContext,
    run_id: str,
    journaling: RunJournaling | None = None,
) -> AgentRunResult | None:
    """Re-run only the synthesis, best-effort (spec CD-08, CD-09), journaled like a fresh one."""
    memory = team_memory(team)
    try:
        lead = resolve_agent(coordinator)
        summary = await memory.summary() if memory is not None else ""
        journal = ConversationJournal(journaling, lead.name) if journaling is not None else None
        outcome = await synthesize(
            lead, goal, queue.tasks, summary, run_id=run_id, emit=ctx.emit, journal=journal
        )
    except Exception as exc:  # spec CD-09: a failed synthesis keeps the recovered task outputs
        ctx.emit(SynthesisFailed(run_id=run_id, error=f"{type(exc).__name__}: {exc}"))
        return None
    if not outcome.result.success:
        ctx.emit(SynthesisFailed(run_id=run_id, error=outcome.result.output))
        return None
    return outcome.result

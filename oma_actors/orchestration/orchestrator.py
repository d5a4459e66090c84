"""``OpenMultiAgent``: the facade. Every flow it offers lives in its own module."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from oma_actors.agents.consequential import (
    ConfirmationState,
    confirmed,
    consequential_tools,
    guard_tool_gate,
    recording_plan_gate,
)
from oma_actors.agents.runner import resolve_agent, run_task
from oma_actors.agents.tool_calls import CallPolicy
from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.errors import ConfigurationError
from oma_actors.events import AgentCompleted, ProgressEvent
from oma_actors.ids import new_id
from oma_actors.journal import JournalOptions, RunJournal
from oma_actors.orchestration.budget import CostEstimator, RunBudget
from oma_actors.orchestration.existing import OnExisting, check_on_existing, continue_existing
from oma_actors.orchestration.flows import FlowContext, plan_tasks, run_task_list
from oma_actors.orchestration.goal_flow import run_goal
from oma_actors.orchestration.journal_calls import (
    abort_run_agent_journal,
    finish_run_agent_journal,
    open_run_agent_journal,
)
from oma_actors.orchestration.journal_setup import (
    OnDamagedJournal,
    check_at_rest,
    check_on_damaged,
    resolve_journal,
)
from oma_actors.orchestration.options import (
    CheckpointArg,
    ResolvedCheckpoint,
    check_max_concurrency,
    checkpoint_options,
    resolve_checkpoint,
)
from oma_actors.orchestration.restore_flow import restore_run
from oma_actors.runs import RunStore, RunStoreOptions, resolve_run_store
from oma_actors.stores.memory import InMemoryStore

RunStoreArg = RunStore | RunStoreOptions | Literal[False] | None
JournalArg = RunJournal | JournalOptions | Literal[False] | None
"""A run-store setting: a store, options, ``False`` (none for this call) or ``None`` (default)."""

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from oma_actors.agents.config import AgentConfig, Team
    from oma_actors.approvals.gates import Gate
    from oma_actors.clock import Clock
    from oma_actors.domain.results import AgentRunResult, TeamRunResult
    from oma_actors.domain.tasks import PlanArtifact, Task

logger = logging.getLogger(__name__)


class OpenMultiAgent:
    """Runs agents, task lists, plans and goals for teams of agents, and restores them.

    Args:
        checkpoint: the default checkpoint setting of every run (per-call replaces it).
        on_progress: receives every ``ProgressEvent``; an exception it raises is logged and
            never breaks the run or its save order.
        max_concurrency: tasks in flight at once per run.
        on_task_dispatch, on_plan_ready, on_tool_call: approval gates (durable approvals).
        require_consequential_confirmation: OMA's option: in ``run_agent`` and ``run_team``,
            every call of a ``consequential`` tool must be confirmed by ``on_tool_call`` (or,
            in ``run_team``, by an allowed ``on_plan_ready``); an unconfirmed call is denied
            and the run ends ``rejected`` (``oma_actors.agents.consequential``).
        max_token_budget: OMA's run-level ``maxTokenBudget``: input + output tokens of every
            task of a run (restored results included); once a finished task takes the run
            above it, the run drains, skips the rest and ends ``budget_exhausted``
            (``BudgetExceeded`` is reported). An agent's own budget is ``AgentConfig``'s.
        max_cost_budget: OMA's ``maxCostBudget``, the same for cost as priced by
            ``estimate_cost(usage, model)`` (required with it).
        clock: the time source of snapshots and task updates (the test kit's ``FakeClock``
            makes them deterministic); the system clock by default.
        run_store: run ownership (spec RS-12): each run acquires its lease before any work and
            fences every write; a ``RunStore`` or ``RunStoreOptions``; per call replaces it and
            ``False`` turns it off for that call.
    """

    def __init__(
        self,
        *,
        checkpoint: CheckpointArg = None,
        on_progress: Callable[[ProgressEvent], None] | None = None,
        max_concurrency: int = 4,
        on_task_dispatch: Gate | None = None,
        on_plan_ready: Gate | None = None,
        on_tool_call: Gate | None = None,
        require_consequential_confirmation: bool = False,
        max_token_budget: int | None = None,
        max_cost_budget: float | None = None,
        estimate_cost: CostEstimator | None = None,
        clock: Clock | None = None,
        journal: JournalArg = None,
        run_store: RunStoreArg = None,
    ) -> None:
        for name, gate in (
            ("on_task_dispatch", on_task_dispatch),
            ("on_plan_ready", on_plan_ready),
            ("on_tool_call", on_tool_call),
        ):
            if gate is not None and not callable(gate):
                raise ConfigurationError(f"{name} must be callable, not {type(gate).__name__}")
        if not isinstance(require_consequential_confirmation, bool):
            raise ConfigurationError("require_consequential_confirmation must be a bool")
        self._confirm_consequential = require_consequential_confirmation
        checkpoint_options(None, checkpoint)  # validate the default early
        self._checkpoint = checkpoint
        self._run_store = run_store
        self._journal = journal
        resolve_run_store(run_store)  # validate the defaults early
        resolve_journal(journal)
        self._on_progress = on_progress
        self._ctx = FlowContext(
            max_concurrency=check_max_concurrency(max_concurrency),
            emit=self._emit,
            on_task_dispatch=on_task_dispatch,
            on_plan_ready=on_plan_ready,
            on_tool_call=on_tool_call,
            clock=clock or SYSTEM_CLOCK,
            budget=RunBudget.of(max_token_budget, max_cost_budget, estimate_cost),
        )
        # Spec CO-05: the last-resort checkpoint store, used when neither the call nor the team
        # gives one; shared by this instance's runs.
        self._fallback_store = InMemoryStore()

    def _emit(self, event: ProgressEvent) -> None:
        if self._on_progress is None:
            return
        try:
            self._on_progress(event)
        except Exception:  # a broken observer must never break the run or its save order
            logger.exception("on_progress callback raised for %s", type(event).__name__)

    def _resolve(
        self, team: Team, per_call: CheckpointArg, *, restoring: bool = False
    ) -> ResolvedCheckpoint | None:
        default: CheckpointArg = self._checkpoint
        if restoring and default is None:
            default = True  # spec CO-03: restore checkpoints by default
        options = checkpoint_options(per_call, default)
        return resolve_checkpoint(options, team=team, fallback=self._fallback_store)

    async def run_agent(
        self, agent: AgentConfig, prompt: str, *, journal: JournalArg = None
    ) -> AgentRunResult:
        """Run one agent on one prompt (never checkpointed).

        Args:
            agent: the agent.
            prompt: its prompt.
            journal: this call's journal (replaces the orchestrator's; ``False``: none). With
                one, the call is journaled as OMA journals ``runAgent``: ``run/start`` (mode
                ``runAgent``), the conversation under the agent's name, ``run/end``.

        Raises:
            ConfigurationError: ``journal`` is neither a journal nor ``JournalOptions``.
        """
        options = resolve_journal(journal, self._journal)
        gate, guard = self._ctx.on_tool_call, None
        guarded = consequential_tools([agent]) if self._confirm_consequential else None
        if guarded:
            guard = ConfirmationState()
            gate = guard_tool_gate(gate, guarded, guard)
        # Never checkpointed, so a tool gate's Suspend fails closed here (spec AP-26).
        policy = CallPolicy(gate=gate, can_suspend=False)
        recording = None
        if options is not None:
            recording = await open_run_agent_journal(
                options, run_id=new_id(), agent=agent.name, emit=self._emit
            )
        try:
            outcome = await run_task(
                resolve_agent(agent), None, prompt, run_id=None, emit=self._emit, policy=policy,
                on_boundary=recording.boundary if recording is not None else None,
                on_request=recording.request if recording is not None else None,
            )  # fmt: skip
        except BaseException as exc:
            if recording is not None:
                abort_run_agent_journal(recording, exc)
            raise
        result = confirmed(outcome.result, guard)
        if recording is not None:
            await finish_run_agent_journal(recording, result)
        self._emit(AgentCompleted(run_id=None, agent=agent.name, task_id=None, result=result))
        return result

    async def run_tasks(
        self,
        team: Team,
        tasks: Sequence[Task],
        *,
        checkpoint: CheckpointArg = None,
        on_existing: OnExisting = "error",
        journal: JournalArg = None,
        run_store: RunStoreArg = None,
    ) -> TeamRunResult:
        """Run explicit tasks; options and the graph are validated before any agent works.

        Args:
            team: the agents.
            tasks: the task graph.
            checkpoint: this call's checkpoint setting (replaces the orchestrator's).
            on_existing: what to do when the key holds an unfinished run (decision D12).
            run_store: this call's run ownership (replaces the orchestrator's; ``False``: none).

        Raises:
            TaskGraphError: cycles, unknown dependencies or assignees, duplicate ids.
            ConfigurationError: no store, team shared memory, run id or key identifies the
                checkpoint (spec CO-06), or a live run in this process uses the same store and
                key (D9).
            RunExistsError: the key holds an unfinished run and ``on_existing="error"``.
            LeaseError: with a run store, the run is owned elsewhere, terminal or suspended.
        """
        resolved = self._resolve(team, checkpoint)
        ctx = self._ctx_for(run_store, journal, resolved)
        if await continue_existing(resolved, check_on_existing(on_existing)):
            return await self._restore(team, tasks, resolved, None, ctx)
        return await run_task_list(team, tasks, ctx=ctx, resolved=resolved)

    async def run_from_plan(
        self,
        team: Team,
        plan: PlanArtifact,
        *,
        checkpoint: CheckpointArg = None,
        on_existing: OnExisting = "error",
        journal: JournalArg = None,
        run_store: RunStoreArg = None,
    ) -> TeamRunResult:
        """Run a reviewed plan artifact with its ids and dependencies used exactly.

        Spec PL-03: the plan's own task ids and dependencies are kept (no renaming), so the
        run's records match the artifact a person reviewed. ``on_existing`` as in run_tasks.
        """
        resolved = self._resolve(team, checkpoint)
        ctx = self._ctx_for(run_store, journal, resolved)
        if await continue_existing(resolved, check_on_existing(on_existing)):
            return await self._restore(team, plan, resolved, None, ctx)
        return await run_task_list(
            team,
            plan_tasks(plan),
            ctx=ctx,
            resolved=resolved,
            mode="runFromPlan",
            goal=plan.goal,
        )

    async def run_team(
        self,
        team: Team,
        goal: str,
        *,
        checkpoint: CheckpointArg = None,
        coordinator: AgentConfig | None = None,
        plan_only: bool = False,
        on_existing: OnExisting = "error",
        journal: JournalArg = None,
        run_store: RunStoreArg = None,
    ) -> TeamRunResult:
        """Let a coordinator plan ``goal`` for the team, run the plan and synthesize the answer.

        ``on_existing`` as in run_tasks; it is decided before the coordinator is asked.
        """
        resolved = self._resolve(team, checkpoint)  # plan_only writes only a plan suspension
        ctx = self._ctx_for(run_store, journal, resolved)
        if await continue_existing(resolved, check_on_existing(on_existing)):
            return await self._restore(team, None, resolved, coordinator, ctx)
        guard = None
        guarded = consequential_tools(team.agents) if self._confirm_consequential else None
        if guarded:
            # OMA guards a fresh run_team only; a restore runs the plan as checkpointed.
            guard = ConfirmationState()
            plan_ready = ctx.on_plan_ready
            ctx = replace(
                ctx,
                on_tool_call=guard_tool_gate(ctx.on_tool_call, guarded, guard),
                on_plan_ready=recording_plan_gate(plan_ready, guard) if plan_ready else None,
            )
        result = await run_goal(
            team,
            goal,
            coordinator=coordinator,
            plan_only=plan_only,
            ctx=ctx,
            resolved=resolved,
        )
        return confirmed(result, guard)

    async def restore(
        self,
        team: Team,
        tasks_or_plan: Sequence[Task] | PlanArtifact | None = None,
        *,
        checkpoint: CheckpointArg = None,
        coordinator: AgentConfig | None = None,
        journal: JournalArg = None,
        run_store: RunStoreArg = None,
        on_damaged_journal: OnDamagedJournal = "refuse",
    ) -> TeamRunResult:
        """Continue the checkpointed run where it stopped.

        Completed tasks are skipped, interrupted runners resume from their saved conversation,
        committed tool results are replayed and never re-run. With no checkpoint, the given
        tasks or plan run fresh (checkpointed).

        Raises:
            CheckpointNotFoundError: no checkpoint and no tasks or plan (decision D12).
            CheckpointError: the stored checkpoint is invalid (never read as "no checkpoint").
            RunIdMismatchError: the checkpoint belongs to another run than the one requested.
            JournalUnavailableError: the snapshot was saved journal-first (D15), ``journal`` is
                not given and the journal its ``journalRef`` names cannot be opened; nothing
                was written.
            JournalDamagedError: that journal's tail fails a fold check and
                ``on_damaged_journal="refuse"``; nothing was written. ``"salvage"`` restores
                instead, with every call the damaged tail shows as started treated as outcome
                unknown (never re-run).
        """
        on_damaged = check_on_damaged(on_damaged_journal)
        resolved = self._resolve(team, checkpoint, restoring=True)
        return await self._restore(
            team, tasks_or_plan, resolved, coordinator, self._ctx_for(run_store, journal, resolved),
            on_damaged_journal=on_damaged,
        )  # fmt: skip

    def _ctx_for(
        self, run_store: RunStoreArg, journal: JournalArg, resolved: ResolvedCheckpoint | None
    ) -> FlowContext:
        """The flow settings of one call: its run store and journal replace the defaults.

        Raises:
            ConfigurationError: the journal would keep in clear what the checkpoint store
                seals (``check_at_rest``).
        """
        options = resolve_journal(journal, self._journal)
        check_at_rest(options, resolved.store if resolved is not None else None)
        return replace(
            self._ctx, run_store=resolve_run_store(run_store, self._run_store), journal=options
        )

    async def _restore(
        self,
        team: Team,
        tasks_or_plan: Sequence[Task] | PlanArtifact | None,
        resolved: ResolvedCheckpoint | None,
        coordinator: AgentConfig | None,
        ctx: FlowContext,
        *,
        on_damaged_journal: OnDamagedJournal = "refuse",
    ) -> TeamRunResult:
        return await restore_run(
            team, tasks_or_plan, ctx=ctx, resolved=resolved, coordinator=coordinator,
            on_damaged_journal=on_damaged_journal,
        )  # fmt: skip

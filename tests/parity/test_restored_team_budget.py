"""A restored ``run_team`` is charged and reported as its fresh run was (README: budgets).

The coordinator's decomposition stays charged across a restore, on top of the completed tasks:
a restore already over its budget runs no task and no synthesis, and ends as the fresh run did.
Its ``token_usage`` counts the decomposition's tokens as the fresh run's does. Its
``agent_results["coordinator"]`` is OMA's restored one: OMA's restore holds only the completed
tasks' results (orchestrator.ts 2283, ``agentResultsFromCheckpoint`` 3187-3210) and attaches the
re-run synthesis alone (2933), so there is no entry before a synthesis and then the synthesis's.
"""

from __future__ import annotations

from coordinator_scenario import lead, team

from oma_actors import CheckpointOptions, OpenMultiAgent, TeamRunResult, TokenUsage
from oma_actors.approvals import Reviewer, Suspend, decide_approval
from oma_actors.events import BudgetExceeded, ProgressEvent
from oma_actors.stores import InMemoryStore

PLAN, SYNTHESIS = (10, 4), (5, 2)  # the worker's answers cost (1, 1)


async def fresh(
    budget: int, store: InMemoryStore, **options: object
) -> tuple[TeamRunResult, list[ProgressEvent]]:
    squad, _ = team()
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(on_progress=events.append, max_token_budget=budget, **options)  # type: ignore[arg-type]
    result = await orchestrator.run_team(
        squad, "explain", coordinator=lead(PLAN, SYNTHESIS),
        checkpoint=CheckpointOptions(store=store, run_id="team-1"),
    )  # fmt: skip
    return result, events


async def restored(
    budget: int, store: InMemoryStore
) -> tuple[TeamRunResult, list[ProgressEvent], tuple[int, int]]:
    """The restore's result, its events and its (worker, coordinator) model calls."""
    squad, worker = team()
    coordinator = lead(PLAN, SYNTHESIS)
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append, max_token_budget=budget).restore(
        squad, coordinator=coordinator, checkpoint=CheckpointOptions(store=store, run_id="team-1")
    )
    calls = (worker.call_count, coordinator.adapter.call_count)  # type: ignore[union-attr]
    return result, events, calls


OVER_AT_16 = (
    ["completed", "skipped"],
    ("budget_exhausted", 'Agent "worker" exceeded token budget: 16 tokens used (budget: 15)'),
    TokenUsage(11, 5),
    [16],
)
"""What a team run stopped at 16 of 15 tokens reports (``reported``): plan 14 + first task 2."""


def reported(result: TeamRunResult, events: list[ProgressEvent]) -> object:
    return (
        [task.status for task in result.tasks],
        (result.status.code, result.status.message),
        result.token_usage,
        [e.used for e in events if isinstance(e, BudgetExceeded)],
    )


def coordinator_usage(result: TeamRunResult) -> TokenUsage | None:
    entry = result.agent_results.get("coordinator")
    return None if entry is None else entry.token_usage


async def test_a_team_restored_over_its_budget_reports_what_the_fresh_run_did() -> None:
    store = InMemoryStore()
    first, first_events = await fresh(15, store)  # plan 14 + first task 2 = 16 > 15
    again, events, calls = await restored(15, store)
    assert calls == (0, 0)  # the restore starts at 16: no task, no synthesis
    assert reported(again, events) == reported(first, first_events)
    assert reported(again, events) == OVER_AT_16
    # The fresh run's entry is its decomposition; the restore holds none (and no synthesis).
    assert (coordinator_usage(first), coordinator_usage(again)) == (TokenUsage(*PLAN), None)


async def test_a_team_whose_last_task_went_over_is_not_synthesized_on_restore() -> None:
    store = InMemoryStore()
    first, first_events = await fresh(17, store)  # 14 + 2 + 2 = 18 > 17 after the last task
    assert [task.status for task in first.tasks] == ["completed", "completed"]
    again, events, calls = await restored(17, store)
    assert calls == (0, 0)
    assert reported(again, events) == reported(first, first_events)
    assert (coordinator_usage(first), coordinator_usage(again)) == (TokenUsage(*PLAN), None)


async def test_a_team_restored_with_a_larger_budget_runs_the_rest_and_reports_every_token() -> None:
    store = InMemoryStore()
    await fresh(15, store)
    again, events, calls = await restored(100, store)
    assert calls == (1, 1)  # the second task, then the synthesis
    assert again.success, again.status
    assert again.token_usage == TokenUsage(10 + 1 + 1 + 5, 4 + 1 + 1 + 2)
    coordinator = again.agent_results["coordinator"]  # the synthesis alone, as OMA's restore
    assert (coordinator.output, coordinator.token_usage) == ("final answer", TokenUsage(*SYNTHESIS))
    assert not [e for e in events if isinstance(e, BudgetExceeded)]


async def test_an_approved_plan_keeps_its_decomposition_charged_on_restore() -> None:
    store = InMemoryStore()
    first, _ = await fresh(15, store, on_plan_ready=lambda tasks: Suspend("review"))
    assert first.status.code == "suspended"
    assert first.agent_results["coordinator"].token_usage == TokenUsage(*PLAN)
    early, _, calls = await restored(15, store)  # before the decision: still suspended
    assert calls == (0, 0)
    assert (early.status.code, early.token_usage) == ("suspended", first.token_usage)
    assert "coordinator" not in early.agent_results  # OMA's restore holds no decomposition
    [request] = first.pending_approvals
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=Reviewer("reviewer-1"),
    )  # fmt: skip
    again, events, calls = await restored(15, store)
    assert calls == (1, 0)  # plan 14 + first task 2 = 16 > 15: the second never runs
    assert reported(again, events) == OVER_AT_16

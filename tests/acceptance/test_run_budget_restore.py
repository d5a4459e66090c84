"""A restore that starts over its run-level budget drains at once, as the fresh run did.

A restore keeps its completed results charged, so a run that a fresh attempt stopped for its
budget is already over it when restored with the same budget: it dispatches nothing (no model
call), skips what is left with the budget's reason, reports ``BudgetExceeded`` once and ends
``budget_exhausted`` with the fresh run's message. The budget is the restore call's option: a
larger one lets the rest run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from acceptance_helpers import answer, run_until

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    TokenUsage,
)
from oma_actors.events import BudgetExceeded, ProgressEvent, TaskSkipped
from oma_actors.llm import ChatOptions, LLMResponse, Message
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "run-budget-restore"


def chain() -> list[Task]:
    return [
        Task("one", "1", id="t1", assignee="w"),
        Task("two", "2", id="t2", assignee="w", depends_on=["t1"]),
    ]


def spender() -> tuple[Team, ScriptedAdapter]:
    """One agent whose every answer costs 3 + 3 tokens."""
    adapter = ScriptedAdapter(lambda m, o: answer("x", usage=(3, 3)))
    return Team("t", [AgentConfig("w", adapter=adapter)]), adapter


async def attempt(
    squad: Team, budget: int, store: InMemoryStore, tasks: Sequence[Task] | None = None
) -> tuple[TeamRunResult, list[ProgressEvent]]:
    """A fresh run of ``tasks`` (or, without them, a restore) under ``budget``."""
    events: list[ProgressEvent] = []
    orchestrator = OpenMultiAgent(on_progress=events.append, max_token_budget=budget)
    checkpoint = CheckpointOptions(store=store, run_id=RUN)
    if tasks is None:
        return await orchestrator.restore(squad, checkpoint=checkpoint), events
    return await orchestrator.run_tasks(squad, list(tasks), checkpoint=checkpoint), events


def budget_facts(result: TeamRunResult, events: list[ProgressEvent]) -> object:
    """What a budget stop reports: statuses, status, the BudgetExceeded and the skip reasons."""
    return (
        [task.status for task in result.tasks],
        (result.success, result.status.code, result.status.message),
        [(e.kind, e.used, e.budget) for e in events if isinstance(e, BudgetExceeded)],
        [(e.task_id, e.reason) for e in events if isinstance(e, TaskSkipped)],
    )


async def test_a_restore_already_over_its_budget_drains_at_once_as_the_fresh_run_did() -> None:
    store = InMemoryStore()
    squad, adapter = spender()
    fresh, fresh_events = await attempt(squad, 5, store, chain())  # "one" spends 6 > 5
    assert adapter.call_count == 1
    restored, events = await attempt(squad, 5, store)
    assert adapter.call_count == 1  # no model call: the restored charge (6) is already over 5
    assert budget_facts(restored, events) == budget_facts(fresh, fresh_events)
    assert budget_facts(restored, events) == (
        ["completed", "skipped"],
        (False, "budget_exhausted", 'Agent "w" exceeded token budget: 6 tokens used (budget: 5)'),
        [("tokens", 6, 5)],
        [("t2", "Skipped: token budget exceeded.")],
    )
    assert restored.token_usage == fresh.token_usage == TokenUsage(3, 3)


async def test_a_restore_with_a_larger_budget_runs_the_rest() -> None:
    store = InMemoryStore()
    squad, adapter = spender()
    await attempt(squad, 5, store, chain())
    restored, events = await attempt(squad, 100, store)
    assert adapter.call_count == 2
    assert restored.success, restored.status
    assert [task.status for task in restored.tasks] == ["completed", "completed"]
    assert not [e for e in events if isinstance(e, BudgetExceeded)]


async def test_a_run_its_last_task_took_over_budget_restores_budget_exhausted() -> None:
    # Nothing is left to skip, but the fresh run ended budget_exhausted: so does its restore.
    store = InMemoryStore()
    squad, adapter = spender()
    fresh, fresh_events = await attempt(squad, 10, store, chain())  # 6, then 12 > 10
    assert [task.status for task in fresh.tasks] == ["completed", "completed"]
    restored, events = await attempt(squad, 10, store)
    assert adapter.call_count == 2
    assert budget_facts(restored, events) == budget_facts(fresh, fresh_events)
    assert restored.status.code == "budget_exhausted"


class HeldSecond:
    """Answers at once (6 tokens), but holds the first call for "b" until it is cancelled."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        prompt = str(getattr(messages[0].content[0], "text", ""))
        self.calls.append(prompt)
        if "# Task: b" in prompt and len(self.calls) <= 2:
            await asyncio.Event().wait()  # cancelled with the fresh run: "b" stays in flight
        return answer("done", usage=(3, 3))


async def test_a_task_in_flight_when_the_budget_ran_out_is_skipped_by_the_restore() -> None:
    # Nothing runs when a restore starts, so nothing drains: the task the fresh run was still
    # draining (in progress in the snapshot) is skipped with the rest, never sent again.
    store = InMemoryStore()
    held = HeldSecond()
    squad = Team("t", [AgentConfig("w", adapter=held)])  # type: ignore[arg-type]
    independent = [Task("a", "a", id="a", assignee="w"), Task("b", "b", id="b", assignee="w")]
    checkpoint = CheckpointOptions(store=store, run_id=RUN)

    async def start(observe: object) -> TeamRunResult:
        orchestrator = OpenMultiAgent(on_progress=observe, max_token_budget=5)  # type: ignore[arg-type]
        return await orchestrator.run_tasks(squad, independent, checkpoint=checkpoint)

    await run_until(start, lambda event: isinstance(event, BudgetExceeded))
    assert len(held.calls) == 2
    restored, events = await attempt(squad, 5, store)
    assert len(held.calls) == 2  # "b" is not sent again
    assert budget_facts(restored, events) == (
        ["completed", "skipped"],
        (False, "budget_exhausted", 'Agent "w" exceeded token budget: 6 tokens used (budget: 5)'),
        [("tokens", 6, 5)],
        [("b", "Skipped: token budget exceeded.")],
    )

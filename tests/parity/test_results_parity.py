"""``TeamRunResult.agent_results`` and a restore's outcome as OMA v1.16.1 builds them.

OMA keeps one result per ``<agent>:<taskId>`` and collapses them by agent name in
``buildTeamRunResult`` (orchestrator.ts 3248-3310): an agent with several results gets one
merged entry (outputs joined by ``\\n\\n---\\n\\n``, empty ones left out; messages and tool
calls concatenated; usage summed; successful only if every part was). A restore seeds that map
from the checkpoint's completed tasks (``agentResultsFromCheckpoint``, 3187-3210), so restored
and new results of one agent merge alike, and a coordinator entry exists only once a restored
synthesis succeeds (2908-2935). A restored task that can never become ready stays as it is
(the loop ends, 831-832), so the run ends ``error`` (3321-3333). Where OMA fails a restored task
whose assignee left the team at dispatch (task-execution.ts 1060-1073, a known limitation, spec
LM-20), we refuse the restore before anything is written.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence

import pytest

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    TokenUsage,
)
from oma_actors.checkpoint import checkpoint_key
from oma_actors.domain.results import AgentRunResult, RunOutcome, ToolCallRecord
from oma_actors.errors import TaskGraphError
from oma_actors.events import (
    ProgressEvent,
    TaskCompleted,
    TaskSkipped,
)
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock
from oma_actors.orchestration.results import merge_agent_results
from oma_actors.runs import MemoryStoreRunStore
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

SEP = "\n\n---\n\n"


def answer(text: str, usage: tuple[int, int] = (1, 1)) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(*usage))


async def run_until(
    start: Callable[[Callable[[ProgressEvent], None]], Awaitable[TeamRunResult]],
    stop_when: Callable[[ProgressEvent], bool],
) -> None:
    """Run until ``stop_when`` sees an event, then cancel the run (an abort, not a crash)."""
    holder: list[asyncio.Task[TeamRunResult]] = []

    def observe(event: ProgressEvent) -> None:
        if stop_when(event):
            holder[0].cancel()

    holder.append(asyncio.ensure_future(start(observe)))
    with pytest.raises(asyncio.CancelledError):
        await holder[0]


def title_of(messages: Sequence[Message]) -> str:
    first = messages[0].content[0]
    return getattr(first, "text", "").splitlines()[0].removeprefix("# Task: ")


def by_title(usage: dict[str, tuple[int, int]]) -> ScriptedAdapter:
    """Answers ``<title> output`` at the usage given for the title; ``bad`` raises."""

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        title = title_of(messages)
        if title == "bad":
            raise ValueError("model exploded")
        if title == "quiet":
            return answer("", usage[title])
        return answer(f"{title} output", usage[title])

    return ScriptedAdapter(script)


def chain(*titles: str, assignee: str = "worker") -> list[Task]:
    """Tasks run one after the other (each depends on the one before)."""
    tasks: list[Task] = []
    for title in titles:
        depends = [tasks[-1].title] if tasks else []
        tasks.append(Task(title, f"do {title}", assignee=assignee, depends_on=depends))
    return tasks


# -- defect 1: one merged entry per agent --------------------------------------------------------


async def test_an_agent_with_several_tasks_gets_one_merged_entry() -> None:
    adapter = by_title({"first": (1, 2), "quiet": (3, 4), "second": (5, 6)})
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    result = await OpenMultiAgent().run_tasks(team, chain("first", "quiet", "second"))
    assert result.success
    entry = result.agent_results["worker"]
    parts = [result.task_results[task.id] for task in result.tasks]
    assert entry.output == f"first output{SEP}second output"  # the empty output is left out
    assert entry.token_usage == TokenUsage(9, 12)
    assert entry.messages == [m for part in parts for m in part.messages]
    assert entry.turns == 3
    assert (entry.success, entry.status) == (True, None)
    assert result.token_usage == TokenUsage(9, 12)


async def test_a_failed_part_makes_the_merged_entry_unsuccessful() -> None:
    adapter = by_title({"first": (1, 1)})
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    tasks = [Task("first", "x", assignee="worker"), Task("bad", "x", assignee="worker")]
    result = await OpenMultiAgent(max_concurrency=1).run_tasks(team, tasks)
    assert not result.success
    entry = result.agent_results["worker"]
    failure = result.task_results[tasks[1].id]
    assert not entry.success
    assert entry.output == f"first output{SEP}{failure.output}"
    assert (failure.status, entry.status) == (None, None)  # a plain error, merged as one


def part(
    output: str, *, success: bool = True, status: RunOutcome | None = None, usage: int = 1
) -> AgentRunResult:
    return AgentRunResult(
        success=success,
        output=output,
        messages=[Message("assistant", [TextBlock(output)])],
        token_usage=TokenUsage(usage, usage),
        tool_calls=[ToolCallRecord(tool_name=output, input={}, output=output, duration_ms=1)],
        turns=1,
        status=status,
        confirmation_required=True,
    )


def test_the_merge_rules_are_oma_s() -> None:
    over = RunOutcome("budget_exhausted", "over")
    rejected = RunOutcome("rejected", "no")
    merged = merge_agent_results(part("a", status=over), part("b", usage=2))
    assert merged == AgentRunResult(
        success=True,
        output=f"a{SEP}b",
        messages=[*part("a").messages, *part("b").messages],
        token_usage=TokenUsage(3, 3),
        tool_calls=[*part("a").tool_calls, *part("b").tool_calls],
        turns=2,
        status=None,  # both succeeded: OMA's ``ok``, whatever the parts said
        confirmation_required=False,  # OMA's merge carries nothing else
    )
    failed = part("b", success=False, status=rejected)
    assert merge_agent_results(part("a", status=over), failed).status == rejected  # the later's
    # OMA: ``result.status ?? existing.status`` (orchestrator.ts 3290-3292 at 16562ed), and
    # every result its agent makes carries a status (``statusOnly('ok')`` when it succeeded):
    # the later part's status stands, ``ok`` included, whatever the earlier part said.
    suspended = RunOutcome("suspended", "Durable approval required before execution can continue.")
    for earlier in (over, suspended, None):
        merged = merge_agent_results(part("a", success=False, status=earlier), part("b"))
        assert (merged.success, merged.status) == (False, RunOutcome("ok"))
    plain = merge_agent_results(part("a", success=False, status=over), part("b", success=False))
    assert plain.status is None  # the later part's plain ``error``, not the earlier ``over``
    assert merge_agent_results(part(""), part("b")).output == "b"


async def test_restored_and_new_results_of_an_agent_merge_in_order() -> None:
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="run-merge")
    usage = {"first": (1, 1), "second": (2, 2), "third": (4, 4)}
    worker, helper = by_title(usage), by_title(usage)
    tasks = [*chain("first", "second"), Task("third", "x", assignee="helper", depends_on=["first"])]

    def squad() -> Team:
        return Team(
            "t", [AgentConfig("worker", adapter=worker), AgentConfig("helper", adapter=helper)]
        )

    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe, max_concurrency=1).run_tasks(
            squad(), tasks, checkpoint=options
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    assert worker.call_count == 1
    result = await OpenMultiAgent(max_concurrency=1).restore(squad(), checkpoint=options)
    assert result.success, result.status
    assert result.agent_results["worker"].output == f"first output{SEP}second output"
    assert result.agent_results["worker"].token_usage == TokenUsage(3, 3)
    assert result.agent_results["helper"].output == "third output"
    assert result.token_usage == TokenUsage(7, 7)


async def test_an_agent_whose_results_were_all_restored_has_its_entry() -> None:
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="run-restored-only")
    usage = {"first": (1, 1), "second": (2, 2)}
    worker, helper = by_title(usage), by_title(usage)
    team = Team("t", [AgentConfig("worker", adapter=worker), AgentConfig("helper", adapter=helper)])
    tasks = [Task("first", "x", assignee="worker"), *chain("second", assignee="helper")]
    tasks[1] = Task("second", "x", assignee="helper", depends_on=["first"])
    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe).run_tasks(
            team, tasks, checkpoint=options
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    result = await OpenMultiAgent().restore(team, checkpoint=options)
    assert result.success, result.status
    assert result.agent_results["worker"].output == "first output"  # restored, not re-run
    assert result.agent_results["helper"].output == "second output"
    assert worker.call_count == 1


# -- defect 2: a restored task that cannot run ------------------------------------------------


async def test_a_restore_whose_team_lost_an_agent_is_refused_before_anything() -> None:
    # OMA fails such a task at dispatch (spec LM-20, a known limitation): the failure is then
    # saved, and restoring again with the team corrected cannot undo it. We refuse the
    # restore with a typed error naming the task and the agent, and write nothing.
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="run-roster")
    usage = {"first": (1, 1), "second": (1, 1), "third": (1, 1), "fourth": (1, 1)}
    worker, other = by_title(usage), by_title(usage)
    tasks = [
        *chain("first", "second"),
        Task("third", "x", assignee="other", depends_on=["first"]),
        Task("fourth", "x", assignee="worker", depends_on=["third"]),
    ]
    full = Team("t", [AgentConfig("worker", adapter=worker), AgentConfig("other", adapter=other)])
    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe).run_tasks(
            full, tasks, checkpoint=options
        ),
        lambda event: isinstance(event, TaskCompleted),
    )
    key = checkpoint_key("run-roster")
    before = await store.get(key)
    smaller = Team("t", [AgentConfig("worker", adapter=worker)])
    with pytest.raises(TaskGraphError, match="'third' -> 'other'"):
        await OpenMultiAgent().restore(smaller, checkpoint=options)
    after = await store.get(key)
    assert before is not None
    assert after is not None
    assert after.value == before.value  # nothing written
    result = await OpenMultiAgent().restore(full, checkpoint=options)  # the team corrected
    assert result.success
    assert other.call_count == 1


def v1_snapshot(first_status: str) -> str:
    """A v1 runTasks snapshot: ``first`` in ``first_status``, ``second`` blocked on it."""
    stamp = {"createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z"}
    partitions: dict[str, list[str]] = {
        name: [] for name in ("pending", "inProgress", "completed", "failed")
    }
    partitions |= {"blocked": ["t2"], "skipped": []}
    partitions["skipped" if first_status == "skipped" else "failed"] = ["t1"]
    return json.dumps(
        {
            "version": 1,
            "mode": "runTasks",
            "runId": "run-blocked",
            "createdAt": "2026-01-01T00:00:00.000Z",
            "queue": {
                "version": 1,
                "tasks": [
                    {**stamp, "id": "t1", "title": "first", "description": "do first",
                     "status": first_status, "assignee": "worker", "result": "why not"},
                    {**stamp, "id": "t2", "title": "second", "description": "do second",
                     "status": "blocked", "assignee": "worker", "dependsOn": ["t1"]},
                ],
                **partitions,
            },
            "completedTaskResults": [],
        }
    )  # fmt: skip


@pytest.mark.parametrize("first_status", ["skipped", "failed"])
async def test_a_restored_task_that_can_never_become_ready_stays_and_the_run_is_error(
    first_status: str,
) -> None:
    store = InMemoryStore()
    await store.set(checkpoint_key("run-blocked"), v1_snapshot(first_status))
    worker = ScriptedAdapter(lambda m, o: answer("unexpected"))
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).restore(
        Team("t", [AgentConfig("worker", adapter=worker)]),
        checkpoint=CheckpointOptions(store=store, run_id="run-blocked"),
    )
    assert worker.call_count == 0
    assert [task.status for task in result.tasks] == [first_status, "blocked"]
    assert (result.success, result.status.code) == (False, "error")
    assert not [e for e in events if isinstance(e, TaskSkipped)]


# -- defect 3: the coordinator's entry after a restore -------------------------------------------


def done_team() -> tuple[Team, ScriptedAdapter]:
    adapter = ScriptedAdapter(lambda m, o: answer("done", (1, 1)))
    return Team("t", [AgentConfig("worker", model="worker-model", adapter=adapter)]), adapter


def coordinator(plan: str, synthesis: tuple[int, int] = (5, 2)) -> AgentConfig:
    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if "Break the goal below" in getattr(messages[0].content[0], "text", ""):
            return answer(plan, (10, 4))
        return answer("final answer", synthesis)

    return AgentConfig("lead", model="lead-model", adapter=ScriptedAdapter(script))


PLAN = json.dumps(
    [
        {"title": "Research", "description": "find facts", "assignee": "worker"},
        {"title": "Write", "description": "write", "assignee": "worker", "dependsOn": ["Research"]},
    ]
)


async def interrupted_team_run(store: InMemoryStore) -> None:
    squad, _ = done_team()
    await run_until(
        lambda observe: OpenMultiAgent(on_progress=observe).run_team(
            squad,
            "explain",
            coordinator=coordinator(PLAN),
            checkpoint=CheckpointOptions(store=store, run_id="team-1"),
        ),
        lambda event: isinstance(event, TaskCompleted),
    )


async def restore_team(store: InMemoryStore, **options: object) -> TeamRunResult:
    squad, _ = done_team()
    return await OpenMultiAgent(**options).restore(  # type: ignore[arg-type]
        squad, coordinator=coordinator(PLAN),
        checkpoint=CheckpointOptions(store=store, run_id="team-1"),
    )  # fmt: skip


async def test_a_restored_synthesis_is_the_coordinator_entry_alone() -> None:
    store = InMemoryStore()
    await interrupted_team_run(store)
    result = await restore_team(store)
    assert result.success, result.status
    entry = result.agent_results["coordinator"]
    # OMA's restore never holds the decomposition's result: the entry is the synthesis.
    assert (entry.output, entry.token_usage) == ("final answer", TokenUsage(5, 2))
    # The decomposition stays charged to the run (our budget continues across restores).
    assert result.token_usage == TokenUsage(10 + 1 + 1 + 5, 4 + 1 + 1 + 2)


async def test_a_restore_that_does_not_synthesize_has_no_coordinator_entry() -> None:
    store = InMemoryStore()
    await interrupted_team_run(store)
    # Over the budget at once (plan 14 + first task 2 > 15): no task, no synthesis.
    result = await restore_team(store, max_token_budget=15)
    assert result.status.code == "budget_exhausted"
    assert "coordinator" not in result.agent_results  # no entry with an empty output
    assert result.token_usage == TokenUsage(11, 5)


async def test_a_finished_team_run_read_back_gives_its_stored_synthesis() -> None:
    store = InMemoryStore()
    await interrupted_team_run(store)
    await restore_team(store)
    again = await restore_team(store)  # decision D4: no model call, the stored synthesis
    entry = again.agent_results["coordinator"]
    assert (entry.output, entry.token_usage) == ("final answer", TokenUsage(5, 2))
    assert again.token_usage == TokenUsage(17, 8)


async def test_a_restored_result_is_filed_under_its_entry_s_assignee_else_unknown() -> None:
    # Spec OR-09: ``<entry.assignee ?? task.assignee ?? "unknown">:<taskId>``.
    stamp = {"createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z"}
    queue_tasks = [
        {**stamp, "id": "t1", "title": "first", "description": "d", "status": "completed",
         "assignee": "worker", "result": "first output"},
        {**stamp, "id": "t2", "title": "second", "description": "d", "status": "completed",
         "result": "second output"},
    ]  # fmt: skip
    snapshot = {
        "version": 1,
        "mode": "runTasks",
        "runId": "run-filed",
        "createdAt": "2026-01-01T00:00:00.000Z",
        "queue": {
            "version": 1, "tasks": queue_tasks, "pending": [], "inProgress": [],
            "completed": ["t1", "t2"], "failed": [], "blocked": [], "skipped": [],
        },
        "completedTaskResults": [
            {"taskId": "t1", "assignee": "ghost", "result": "first output"},
            {"taskId": "t2", "result": "second output"},
        ],
    }  # fmt: skip
    store = InMemoryStore()
    await store.set(checkpoint_key("run-filed"), json.dumps(snapshot))
    result = await OpenMultiAgent().restore(
        Team("t", [AgentConfig("worker", adapter=ScriptedAdapter([]))]),
        checkpoint=CheckpointOptions(store=store, run_id="run-filed"),
    )
    assert result.success, result.status
    outputs = {name: entry.output for name, entry in result.agent_results.items()}
    assert outputs == {"ghost": "first output", "unknown": "second output"}


async def test_a_finished_team_run_read_back_under_its_run_store_gives_what_it_stored() -> None:
    store = InMemoryStore()
    runs = MemoryStoreRunStore(store)
    options = CheckpointOptions(store=store, run_id="team-1")
    squad, _ = done_team()
    fresh = await OpenMultiAgent(run_store=runs).run_team(
        squad, "explain", coordinator=coordinator(PLAN), checkpoint=options
    )
    squad, worker = done_team()
    again = await OpenMultiAgent(run_store=runs).restore(
        squad, coordinator=coordinator(PLAN), checkpoint=options
    )
    assert worker.call_count == 0  # decision D4: read back, not re-run
    assert again.agent_results["worker"] == fresh.agent_results["worker"]
    assert again.agent_results["worker"].output == f"done{SEP}done"
    entry = again.agent_results["coordinator"]
    assert (entry.output, entry.token_usage) == ("final answer", TokenUsage(5, 2))
    assert again.token_usage == fresh.token_usage == TokenUsage(17, 8)

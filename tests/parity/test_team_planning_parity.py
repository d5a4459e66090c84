"""``run_team`` planning as OMA v1.16.1 plans (spec CD-02, CD-03, CD-05).

Each test pins one OMA behaviour read from its source:

* ``orchestrator.ts`` (``runTeam`` steps 2-3): with ``onPlanReady`` or ``planOnly`` the default
  ``dependency-first`` scheduler assigns the ready, unassigned tasks BEFORE the plan is shown
  or returned (``scheduler.ts`` ``scheduleDependencyFirst``: most blocked dependents first,
  agents in roster order from a cursor at 0; a blocked task waits for its dispatch).
* ``coordinator.ts`` ``coordinatorTaskSpecsSchema``: zod trims the strings, accepts any JSON
  number that is an integer for ``maxRetries`` (``1.0``), any finite non-negative
  ``retryDelayMs`` and positive ``retryBackoff``, and refuses unknown keys and ``null``;
  ``loadSpecsIntoQueue`` hands the retry fields to the task.
* ``agent.ts`` ``validateStructuredOutput``: the repair is a new ``backend.run`` (its own
  ``maxTurns``) over the prompt, the first answer and OMA's feedback message; its usage is
  added to the first call's.
* ``orchestrator.ts`` (step 2): a plan still invalid after the repair is
  ``COORDINATOR_PLAN_INVALID`` ("Coordinator plan failed structured validation after repair."),
  whatever was wrong with it, reported after the coordinator's ``agent_complete``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from oma_actors import AgentConfig, OpenMultiAgent, TaskState, Team, TokenUsage
from oma_actors.domain.results import AgentRunResult, RunOutcome
from oma_actors.domain.tasks import Task
from oma_actors.errors import RateLimitError
from oma_actors.events import AgentCompleted, CoordinatorFailed, ProgressEvent, TaskRetry
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock
from oma_actors.orchestration.coordinator import Decomposition
from oma_actors.orchestration.decomposition import PlanProblem, parse_task_list
from oma_actors.orchestration.flows import FlowContext
from oma_actors.orchestration.goal_flow import plan_queue
from oma_actors.testing import ScriptedAdapter


def answer(text: str, usage: tuple[int, int] = (1, 1)) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(*usage))


def squad(*names: str) -> tuple[Team, ScriptedAdapter]:
    workers = ScriptedAdapter(lambda m, o: answer("done"))
    return Team("t", [AgentConfig(name, adapter=workers) for name in names]), workers


def lead(*replies: str, max_turns: int = 3) -> tuple[AgentConfig, ScriptedAdapter]:
    adapter = ScriptedAdapter(
        [answer(text, usage=(10 * (i + 1), i + 1)) for i, text in enumerate(replies)]
    )
    return AgentConfig("coordinator", adapter=adapter, max_turns=max_turns), adapter


# -- CD-05: the plan a reviewer sees (or a plan-only run returns) carries OMA's assignees ------

UNASSIGNED = [
    {"title": "A", "description": "a"},
    {"title": "B", "description": "b"},
    {"title": "C", "description": "c", "dependsOn": ["B"]},
    {"title": "D", "description": "d"},
    {"title": "E", "description": "e", "assignee": "bob"},
]
# Ready and unassigned: A, B, D. B blocks one task (C), so it goes first: B -> alice, then
# A -> bob, D -> alice (roster order, cursor from 0). C is blocked: assigned at dispatch.
EXPECTED = {"A": "bob", "B": "alice", "C": None, "D": "alice", "E": "bob"}


async def test_a_plan_only_run_returns_the_assignees_the_scheduler_gives() -> None:
    team, workers = squad("alice", "bob")
    coordinator, _ = lead(json.dumps(UNASSIGNED))
    result = await OpenMultiAgent().run_team(team, "g", coordinator=coordinator, plan_only=True)
    assert result.plan_only
    assert {task.title: task.assignee for task in result.tasks} == EXPECTED
    assert workers.call_count == 0


async def test_on_plan_ready_sees_the_assignees_before_anything_runs() -> None:
    seen: list[dict[str, str | None]] = []

    def review(tasks: Sequence[TaskState]) -> bool:
        seen.append({task.title: task.assignee for task in tasks})
        return True

    team, _ = squad("alice", "bob")
    coordinator, _ = lead(json.dumps(UNASSIGNED), "final")
    result = await OpenMultiAgent(on_plan_ready=review).run_team(team, "g", coordinator=coordinator)
    assert seen == [EXPECTED]
    assert result.success, result.status
    # The up-front choice is the one that runs; C, assigned at its dispatch, continues the
    # same scheduler's cursor (three tasks assigned up front: bob next), as OMA's one
    # scheduler per run does.
    ran = {task.title: task.assignee for task in result.tasks}
    assert ran == {**EXPECTED, "C": "bob"}


# -- plan fields as OMA's schema reads them ----------------------------------------------------

RETRYING = [
    {
        "title": "Fetch",
        "description": "fetch it",
        "assignee": " worker ",
        "maxRetries": 1.0,
        "retryDelayMs": 0,
        "retryBackoff": 1.5,
    }
]


async def test_a_plan_task_keeps_the_retry_fields_and_a_trimmed_assignee() -> None:
    team, _ = squad("worker")
    coordinator, lead_adapter = lead(json.dumps(RETRYING))
    result = await OpenMultiAgent().run_team(team, "g", coordinator=coordinator, plan_only=True)
    assert lead_adapter.call_count == 1  # valid as it was: no repair
    [task] = result.tasks
    assert (task.assignee, task.max_retries, task.retry_delay_ms, task.retry_backoff) == (
        "worker",
        1,
        0,
        1.5,
    )


async def test_the_plan_retry_delay_is_the_one_the_retry_waits() -> None:
    attempts: list[int] = []

    def flaky(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        attempts.append(1)
        if len(attempts) == 1:
            raise RateLimitError("scripted", "slow down")
        return answer("fetched")

    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter(flaky))])
    coordinator, _ = lead(json.dumps(RETRYING), "final")
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).run_team(
        team, "g", coordinator=coordinator
    )
    assert result.success, result.status
    retries = [event for event in events if isinstance(event, TaskRetry)]
    assert [(r.attempt, r.max_attempts, r.next_delay_ms) for r in retries] == [(1, 2, 0)]


def test_the_schema_refuses_what_zod_refuses_and_takes_what_it_takes() -> None:
    roster = ["w"]
    cases = {
        '[{"title": "a", "description": "b", "extra": 1}]': "  - 0: Unrecognized key(s) in object: 'extra'",
        '[{"title": "a", "description": "b", "assignee": null}]': "  - 0.assignee: Expected string, received null",
        '[{"title": "a", "description": "b", "maxRetries": 1.5}]': "  - 0.maxRetries: Expected integer, received float",
        '[{"title": "a", "description": "b", "retryBackoff": 0}]': "  - 0.retryBackoff: Number must be greater than 0",
        '[{"title": "a", "description": "b", "retryDelayMs": -1}]': "  - 0.retryDelayMs: Number must be greater than or equal to 0",
        '[{"title": "a", "description": "b", "priority": "urgent"}]': "  - 0.priority: Invalid enum value. Expected 'low' | 'normal' | 'high' | 'critical', received 'urgent'",
        '[{"title": "  ", "description": "b"}]': "  - 0.title: String must contain at least 1 character(s)",
        '[{"title": "a"}]': "  - 0.description: Required",
        "[]": "  - (root): Array must contain at least 1 element(s)",
        '{"title": "a"}': "  - (root): Expected array, received object",
    }
    for text, line in cases.items():
        problem = parse_task_list(text, roster)
        assert isinstance(problem, PlanProblem), text
        assert problem.message == f"Output validation failed:\n{line}", text
    taken = parse_task_list(
        '[{"title": " a ", "description": " b ", "assignee": " w ", "maxRetries": 2.0,'
        ' "retryDelayMs": 250.0, "role": "r", "priority": "high", "memoryScope": "all",'
        ' "requires": {"requiredTools": ["x"]}, "verify": true},'
        ' {"title": "c", "description": "d", "dependsOn": [" A "]}]',
        roster,
    )
    assert not isinstance(taken, PlanProblem), taken
    assert [(t.title, t.description, t.assignee, t.max_retries) for t in taken] == [
        ("a", "b", "w", 2),
        ("c", "d", None, 0),
    ]
    assert taken[0].retry_delay_ms == 250
    assert taken[1].depends_on == ("A",)


def test_no_json_is_reported_as_oma_reports_it() -> None:
    problem = parse_task_list("  I cannot produce JSON " + "x" * 200, ["w"])
    assert isinstance(problem, PlanProblem)
    assert problem.message == (
        'Failed to extract JSON from output. Raw output begins with: "I cannot produce JSON '
        + "x" * 78
        + '"'
    )
    # JavaScript's JSON.parse knows no NaN: the whole reply does not parse, the object span
    # does (Python's json module would read the whole reply, NaN and all).
    nan = parse_task_list('[{"title": "a", "description": "b"}, NaN]', ["w"])
    assert isinstance(nan, PlanProblem)
    assert nan.errors == ("(root): Expected array, received object",)


# -- the repair request: a fresh run with its own max_turns, OMA's feedback, summed usage -----

BAD = json.dumps([{"title": "Fetch", "description": "x", "assignee": "ghost"}])
GOOD = json.dumps([{"title": "Fetch", "description": "fetch it", "assignee": "worker"}])


async def test_the_repair_gets_its_model_call_with_max_turns_one() -> None:
    team, _ = squad("worker")
    coordinator, lead_adapter = lead(BAD, GOOD, "final", max_turns=1)
    result = await OpenMultiAgent().run_team(team, "g", coordinator=coordinator)
    assert result.success, result.status
    assert lead_adapter.call_count == 3  # plan, repair, synthesis
    repair = lead_adapter.calls[1]
    assert [message.role for message in repair.messages] == ["user", "assistant", "user"]
    feedback = repair.messages[-1].content[0]
    assert isinstance(feedback, TextBlock)
    assert feedback.text == (
        "Your previous response did not produce valid JSON matching the required schema.\n"
        "\n"
        "Error: Output validation failed:\n"
        '  - 0.assignee: Unknown assignee "ghost".\n'
        "\n"
        "Please try again. Respond with ONLY valid JSON, no other text."
    )
    # The decomposition is both calls (10+20 in, 1+2 out); the synthesis is the third call.
    assert result.agent_results["coordinator"].token_usage == TokenUsage(10 + 20 + 30, 1 + 2 + 3)


async def test_a_plan_still_invalid_after_the_repair_is_coordinator_plan_invalid() -> None:
    team, workers = squad("worker")
    coordinator, lead_adapter = lead(BAD, BAD)
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).run_team(
        team, "g", coordinator=coordinator
    )
    assert lead_adapter.call_count == 2
    assert workers.call_count == 0
    assert (result.success, result.status.code, result.tasks) == (False, "error", [])
    assert result.status.message == (
        "COORDINATOR_PLAN_INVALID: Coordinator plan failed structured validation after repair."
    )
    tail = [e for e in events if isinstance(e, AgentCompleted | CoordinatorFailed)]
    assert [type(e).__name__ for e in tail] == ["AgentCompleted", "CoordinatorFailed"]
    completed, failed = tail
    assert isinstance(completed, AgentCompleted)
    assert isinstance(failed, CoordinatorFailed)
    assert (completed.agent, completed.task_id, completed.result.output) == (
        "coordinator",
        None,
        BAD,
    )
    assert completed.result.token_usage == TokenUsage(30, 3)
    assert (failed.code, failed.message) == (
        "COORDINATOR_PLAN_INVALID",
        "Coordinator plan failed structured validation after repair.",
    )


def test_a_json_fence_is_found_only_in_lower_case_as_oma_finds_it() -> None:
    # structured-output.ts: /```json.../ is case-sensitive; a ```JSON fence is a bare fence
    # whose text ("JSON\n[...]") does not parse, so the object span is taken: no array.
    problem = parse_task_list('```JSON\n[{"title": "a", "description": "b"}]\n```', ["w"])
    assert isinstance(problem, PlanProblem)
    assert problem.errors == ("(root): Expected array, received object",)
    assert not isinstance(
        parse_task_list('```json\n[{"title": "a", "description": "b"}]\n```', ["w"]), PlanProblem
    )


async def test_a_plan_only_run_reports_the_coordinators_decomposition() -> None:
    # orchestrator.ts: planOnly emits agent_complete for the coordinator before returning.
    team, _ = squad("worker")
    coordinator, _ = lead(GOOD)
    events: list[ProgressEvent] = []
    await OpenMultiAgent(on_progress=events.append).run_team(
        team, "g", coordinator=coordinator, plan_only=True
    )
    [completed] = [e for e in events if isinstance(e, AgentCompleted)]
    assert (completed.agent, completed.task_id, completed.result.output) == (
        "coordinator",
        None,
        GOOD,
    )


async def test_a_decomposition_over_the_budget_reports_no_plan_failure() -> None:
    # OMA charges the decomposition first: over the budget it returns budget_exhausted before
    # looking at the plan, so no agent_complete and no COORDINATOR_PLAN_INVALID error.
    team, _ = squad("worker")
    coordinator, _ = lead(BAD, BAD)
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append, max_token_budget=5).run_team(
        team, "g", coordinator=coordinator
    )
    assert result.status.code == "budget_exhausted"
    assert not [e for e in events if isinstance(e, AgentCompleted | CoordinatorFailed)]


def test_a_graph_the_queue_refuses_is_invalid_task_dependencies() -> None:
    # loadSpecsIntoQueue's own validation (after the schema): INVALID_TASK_DEPENDENCIES, with
    # "Invalid task dependencies: ..." as the error's message.
    first, second = (
        Task("a", "x", id="1", depends_on=["2"]),
        Task("b", "y", id="2", depends_on=["1"]),
    )
    plan = Decomposition(
        tasks=[first, second], problem=None, result=AgentRunResult(success=True, output="[]")
    )
    events: list[ProgressEvent] = []
    context = FlowContext(max_concurrency=1, emit=events.append)
    status = plan_queue(plan, context, "run")
    assert isinstance(status, RunOutcome)
    assert status.code == "error"
    assert (status.message or "").startswith(
        "INVALID_TASK_DEPENDENCIES: Invalid task dependencies: "
    )
    assert [type(e).__name__ for e in events] == ["AgentCompleted", "CoordinatorFailed"]

"""run_team: decomposition with one repair, the team's work, synthesis, plan_only."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from acceptance_helpers import answer

from oma_actors import AgentConfig, OpenMultiAgent, Team
from oma_actors.events import CoordinatorFailed, ProgressEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message
from oma_actors.testing import ScriptedAdapter

PLAN = [
    {"title": "Research", "description": "find facts", "assignee": "researcher"},
    {"title": "Write", "description": "write it", "assignee": "writer", "dependsOn": ["Research"]},
]


def worker(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    title = getattr(messages[0].content[0], "text", "").splitlines()[0].removeprefix("# Task: ")
    return answer(f"{title} result")


def team() -> tuple[Team, ScriptedAdapter]:
    adapter = ScriptedAdapter(worker)
    return (
        Team(
            "t",
            [AgentConfig("researcher", adapter=adapter), AgentConfig("writer", adapter=adapter)],
        ),
        adapter,
    )


async def test_decompose_run_and_synthesize() -> None:
    squad, workers = team()
    lead = ScriptedAdapter(
        [answer(json.dumps(PLAN), usage=(10, 10)), answer("final answer", usage=(5, 5))]
    )
    result = await OpenMultiAgent().run_team(
        squad, "explain", coordinator=AgentConfig("coordinator", adapter=lead)
    )
    assert result.success
    assert [(task.title, task.status, task.assignee) for task in result.tasks] == [
        ("Research", "completed", "researcher"),
        ("Write", "completed", "writer"),
    ]
    assert result.agent_results["coordinator"].output == "final answer"
    assert lead.call_count == 2
    synthesis_prompt = lead.calls[1].prompt
    assert "## Original Goal\nexplain" in synthesis_prompt
    assert "### Write (completed by writer)\nWrite result" in synthesis_prompt
    assert "Research result" in workers.calls[1].prompt
    assert result.token_usage.input_tokens == 10 + 5 + 2


async def test_a_failed_synthesis_fails_the_run() -> None:
    # OMA's buildTeamRunResult counts the coordinator's result as any other: its failure makes
    # the run ``error`` (spec TQ-07, CD-09); the tasks' work is still reported.
    squad, _ = team()

    def lead_answers(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if lead.call_count == 1:
            return answer(json.dumps(PLAN))
        raise RuntimeError("provider down during synthesis")

    lead = ScriptedAdapter(lead_answers)
    result = await OpenMultiAgent().run_team(
        squad, "explain", coordinator=AgentConfig("coordinator", adapter=lead)
    )
    assert (result.success, result.status.code) == (False, "error")
    assert "synthesis failed" in (result.status.message or "")
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    assert not result.agent_results["coordinator"].success


async def test_invalid_plan_is_repaired_once() -> None:
    squad, _ = team()
    bad = [{"title": "Research", "description": "x", "assignee": "ghost"}]
    lead = ScriptedAdapter([answer(json.dumps(bad)), answer(json.dumps(PLAN)), answer("done")])
    result = await OpenMultiAgent().run_team(
        squad, "g", coordinator=AgentConfig("coordinator", adapter=lead)
    )
    assert result.success
    assert "ghost" in lead.calls[1].prompt  # the repair request names the problem
    assert len(lead.calls[1].messages) == 3  # same conversation: prompt, bad answer, repair


async def test_still_invalid_after_repair_runs_nothing() -> None:
    squad, workers = team()
    lead = ScriptedAdapter([answer("not json"), answer("[]")])
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append).run_team(
        squad, "g", coordinator=AgentConfig("coordinator", adapter=lead)
    )
    assert not result.success
    assert result.tasks == []
    assert workers.call_count == 0
    failures = [event for event in events if isinstance(event, CoordinatorFailed)]
    assert [event.code for event in failures] == ["COORDINATOR_PLAN_INVALID"]
    assert "COORDINATOR_PLAN_INVALID" in (result.status.message or "")


async def test_plan_only_returns_pending_tasks_without_running() -> None:
    squad, workers = team()
    lead = ScriptedAdapter([answer(json.dumps(PLAN))])
    result = await OpenMultiAgent().run_team(
        squad, "g", coordinator=AgentConfig("coordinator", adapter=lead), plan_only=True
    )
    assert result.plan_only
    assert [task.status for task in result.tasks] == ["pending", "pending"]
    assert workers.call_count == 0
    assert result.tasks[1].depends_on == (result.tasks[0].id,)


async def test_default_coordinator_uses_the_first_agents_adapter() -> None:
    responses = iter([answer(json.dumps(PLAN[:1])), answer("Research result"), answer("summary")])

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        return next(responses)

    adapter = ScriptedAdapter(script)
    squad = Team("t", [AgentConfig("researcher", adapter=adapter)])
    result = await OpenMultiAgent().run_team(squad, "g")
    assert result.success
    assert result.agent_results["coordinator"].output == "summary"
    assert adapter.calls[0].options.system_prompt is not None
    assert "coordinator" in adapter.calls[0].options.system_prompt


@pytest.mark.parametrize(
    ("gate_answer", "status"),
    [
        (False, ("rejected", "Plan approval rejected.")),
        (
            RuntimeError("gate bug"),
            ("error", "Plan approval callback failed: RuntimeError: gate bug"),
        ),
    ],
)
async def test_a_refused_or_failed_plan_gate_runs_and_lists_no_task(
    gate_answer: object, status: tuple[str, str]
) -> None:
    # OMA: a denied plan is rejected, a gate that raised is the callback's error
    # (classifyRunFailure, kind callback); either way tasks: [] (spec AP-23).
    squad, workers = team()

    def gate(tasks: object) -> object:
        if isinstance(gate_answer, Exception):
            raise gate_answer
        return gate_answer

    lead = ScriptedAdapter([answer(json.dumps(PLAN))])
    result = await OpenMultiAgent(on_plan_ready=gate).run_team(
        squad, "explain", coordinator=AgentConfig("coordinator", adapter=lead)
    )
    assert (result.status.code, result.status.message) == status
    assert result.tasks == []
    assert workers.call_count == 0


async def test_the_coordinator_synthesizes_after_a_rejected_dispatch() -> None:
    # Spec CD-07: the synthesis is skipped only for a suspension, an abort or a budget already
    # exceeded; a refused dispatch still gets one, and the rejection stays the run's status.
    squad, _ = team()
    lead = ScriptedAdapter([answer(json.dumps(PLAN)), answer("what we have")])
    result = await OpenMultiAgent(on_task_dispatch=lambda task: task.title != "Write").run_team(
        squad, "explain", coordinator=AgentConfig("coordinator", adapter=lead)
    )
    assert result.status.code == "rejected"
    assert lead.call_count == 2
    assert result.agent_results["coordinator"].output == "what we have"
    assert [task.status for task in result.tasks] == ["completed", "skipped"]

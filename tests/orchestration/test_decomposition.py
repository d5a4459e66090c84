"""Coordinator task-list parsing (spec CD-02..CD-04)."""

from __future__ import annotations

import json

import pytest

from oma_actors.orchestration.decomposition import PlanProblem, extract_json, parse_task_list

ROSTER = ["alice", "bob"]


def test_valid_list_gets_fresh_ids_and_resolves_titles() -> None:
    text = json.dumps(
        [
            {"title": "Research", "description": "look", "assignee": "alice"},
            {"title": "Write", "description": "write", "dependsOn": ["research"], "maxRetries": 2},
        ]
    )
    tasks = parse_task_list(text, ROSTER)
    assert not isinstance(tasks, PlanProblem)
    assert [task.title for task in tasks] == ["Research", "Write"]
    assert tasks[0].id != tasks[1].id
    assert tasks[1].depends_on == ("research",)
    assert tasks[1].max_retries == 2


def test_code_fence_is_tolerated() -> None:
    text = '```json\n[{"title": "a", "description": "b"}]\n```'
    assert not isinstance(parse_task_list(text, ROSTER), PlanProblem)


TWO = '[{"title": "a", "description": "b"}, {"title": "c", "description": "d"}]'


@pytest.mark.parametrize(
    "text",
    [
        f"Here is the plan:\n{TWO}\nGood luck!",  # first '[' .. last ']' (the object span fails)
        f"Plan below.\n```json\n{TWO}\n```\nThat is all.",  # a json fence anywhere
        f"Plan:\n```JSON\n{TWO}\n```",
        f"Plan:\n```\n{TWO}\n```",  # a bare fence
        f"```json\nnot json\n```\n{TWO}",  # a fence that does not parse is passed over
    ],
)
def test_a_list_in_prose_or_in_a_fence_anywhere_is_found_as_oma_finds_it(text: str) -> None:
    # OMA's structured output (agent/structured-output.ts ``extractJSON``) tries the whole reply,
    # a ``json`` fence, a bare fence, the first ``{`` to the last ``}``, then ``[`` .. ``]``.
    tasks = parse_task_list(text, ROSTER)
    assert not isinstance(tasks, PlanProblem), tasks
    assert [task.title for task in tasks] == ["a", "c"]


def test_extract_json_takes_the_object_span_before_the_array_span_as_oma_does() -> None:
    # One task in prose: its object spans first '{' .. last '}' and parses, so the reply reads
    # as an object, which a task list refuses (OMA then asks for a repair, as we do).
    one = 'Plan: [{"title": "a", "description": "b"}] ok'
    assert extract_json(one) == {"title": "a", "description": "b"}
    assert isinstance(parse_task_list(one, ROSTER), PlanProblem)
    with pytest.raises(json.JSONDecodeError):
        extract_json("no json here")


@pytest.mark.parametrize(
    ("text", "issue"),
    [
        ("not json", 'Failed to extract JSON from output. Raw output begins with: "not json"'),
        ("{}", "(root): Expected array, received object"),
        # An item that is no object is named, not crashed on (the model is asked to repair).
        ('["do it", {"title": "a", "description": "b"}]', "0: Expected object, received string"),
        (
            '[{"title": "", "description": "x"}]',
            "0.title: String must contain at least 1 character(s)",
        ),
        ('[{"title": "a"}]', "0.description: Required"),
        (
            '[{"title": "a", "description": "b", "assignee": "zed"}]',
            '0.assignee: Unknown assignee "zed".',
        ),
        (
            '[{"title": "a", "description": "b", "dependsOn": ["ghost"]}]',
            '0.dependsOn.0: Unknown dependency "ghost".',
        ),
        (
            '[{"title": "a", "description": "b"}, {"title": "A", "description": "c"}]',
            '1.title: Duplicate task title "a".',
        ),
        (
            '[{"title": "a", "description": "b", "dependsOn": ["c"]},'
            ' {"title": "c", "description": "d", "dependsOn": ["a"]}]',
            "(root): Cyclic task dependency detected.",
        ),
    ],
)
def test_invalid_lists_are_refused_as_omas_schema_refuses_them(text: str, issue: str) -> None:
    # OMA checks the roster, the dependency titles, duplicates and cycles in the same zod
    # schema as the shape (coordinator.ts ``buildCoordinatorTaskSpecsSchema``), so each is a
    # schema issue, repaired once, and still-invalid output is COORDINATOR_PLAN_INVALID
    # (orchestrator.ts ``runTeam`` step 2; OMA's test "returns a structured validation error
    # for an invalid assignee by default").
    problem = parse_task_list(text, ROSTER)
    assert isinstance(problem, PlanProblem)
    assert problem.code == "COORDINATOR_PLAN_INVALID"
    assert issue in problem.errors, problem.errors

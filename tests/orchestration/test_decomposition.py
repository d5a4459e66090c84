"""Coordinator task-list parsing (spec CD-02..CD-04)."""

from __future__ import annotations

import json

import pytest

from oma_actors.orchestration.decomposition import PlanProblem, parse_task_list

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


@pytest.mark.parametrize(
    ("text", "code", "fragment"),
    [
        ("not json", "COORDINATOR_PLAN_INVALID", "not valid JSON"),
        ("{}", "COORDINATOR_PLAN_INVALID", "non-empty JSON array"),
        # An item that is no object is named, not crashed on (the model is asked to repair).
        ('["do it", {"title": "a", "description": "b"}]', "COORDINATOR_PLAN_INVALID", "#1: must"),
        ('[{"title": "", "description": "x"}]', "COORDINATOR_PLAN_INVALID", "'title'"),
        ('[{"title": "a"}]', "COORDINATOR_PLAN_INVALID", "'description'"),
        ('[{"title": "a", "description": "b", "assignee": "zed"}]', "INVALID_ASSIGNEE", "zed"),
        (
            '[{"title": "a", "description": "b", "dependsOn": ["ghost"]}]',
            "INVALID_TASK_DEPENDENCIES",
            "ghost",
        ),
        (
            '[{"title": "a", "description": "b"}, {"title": "A", "description": "c"}]',
            "INVALID_TASK_DEPENDENCIES",
            "duplicate title",
        ),
        (
            '[{"title": "a", "description": "b", "dependsOn": ["c"]},'
            ' {"title": "c", "description": "d", "dependsOn": ["a"]}]',
            "INVALID_TASK_DEPENDENCIES",
            "cycle",
        ),
    ],
)
def test_invalid_lists_are_refused_with_a_code(text: str, code: str, fragment: str) -> None:
    problem = parse_task_list(text, ROSTER)
    assert isinstance(problem, PlanProblem)
    assert problem.code == code
    assert any(fragment in error for error in problem.errors), problem.errors

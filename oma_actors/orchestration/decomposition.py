"""Parsing and validating the coordinator's task list (spec CD-02..CD-04). Pure."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oma_actors.domain.tasks import Task
from oma_actors.errors import TaskGraphError
from oma_actors.orchestration.graph import resolve_dependencies

if TYPE_CHECKING:
    from collections.abc import Sequence

_JSON_FENCE = re.compile(r"```json\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_ANY_FENCE = re.compile(r"```\s*(.*?)```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class PlanProblem:
    """Why a task list was refused: an OMA error code and the problems found."""

    code: str
    errors: tuple[str, ...]


def parse_task_list(text: str, roster: Sequence[str]) -> list[Task] | PlanProblem:
    """Turn the coordinator's reply into tasks with fresh ids, or say what is wrong.

    Codes: ``COORDINATOR_PLAN_INVALID`` (not a JSON array of valid task objects),
    ``INVALID_ASSIGNEE`` (an assignee outside the roster), ``INVALID_TASK_DEPENDENCIES``
    (unknown or ambiguous titles, duplicates, cycles).
    """
    try:
        data: Any = extract_json(text)
    except json.JSONDecodeError as exc:
        return PlanProblem("COORDINATOR_PLAN_INVALID", (f"reply is not valid JSON: {exc.msg}",))
    if not isinstance(data, list) or not data:
        return PlanProblem("COORDINATOR_PLAN_INVALID", ("reply must be a non-empty JSON array",))

    errors: list[str] = []
    for index, item in enumerate(data):
        errors.extend(_shape_errors(index, item))
    if errors:
        return PlanProblem("COORDINATOR_PLAN_INVALID", tuple(errors))

    bad_assignees = [
        f"task {item['title']!r}: unknown assignee {item['assignee']!r} (team: {', '.join(roster)})"
        for item in data
        if item.get("assignee") is not None and item["assignee"] not in roster
    ]
    if bad_assignees:
        return PlanProblem("INVALID_ASSIGNEE", tuple(bad_assignees))

    titles = [item["title"].strip().lower() for item in data]
    duplicates = sorted({title for title in titles if titles.count(title) > 1})
    if duplicates:
        return PlanProblem(
            "INVALID_TASK_DEPENDENCIES", tuple(f"duplicate title {title!r}" for title in duplicates)
        )
    tasks = [
        Task(
            item["title"].strip(),
            item["description"].strip(),
            assignee=item.get("assignee"),
            depends_on=list(item.get("dependsOn") or []),
            max_retries=int(item.get("maxRetries") or 0),
        )
        for item in data
    ]
    try:
        resolve_dependencies(tasks)
    except TaskGraphError as exc:
        return PlanProblem("INVALID_TASK_DEPENDENCIES", (str(exc),))
    return tasks


def extract_json(text: str) -> Any:
    """The JSON value in a model's reply, found as OMA's structured output finds it.

    Models wrap JSON in prose and fences. Tried in order, the first that parses wins: the whole
    reply; the first fence marked ``json`` anywhere in it; the first fence of any kind; the
    text from the first ``{`` to the last ``}``; from the first ``[`` to the last ``]``.

    Raises:
        json.JSONDecodeError: none of them parses (the whole reply's error).
    """
    body = text.strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError as first:
        candidates = [
            match.group(1) for match in (_JSON_FENCE.search(body), _ANY_FENCE.search(body)) if match
        ]
        for opener, closer in (("{", "}"), ("[", "]")):
            start, end = body.find(opener), body.rfind(closer)
            if 0 <= start < end:
                candidates.append(body[start : end + 1])
        for candidate in candidates:
            try:
                return json.loads(candidate.strip())
            except json.JSONDecodeError:
                continue
        raise first from None


def _shape_errors(index: int, item: object) -> list[str]:
    where = f"task #{index + 1}"
    if not isinstance(item, dict):
        return [f"{where}: must be an object"]
    errors: list[str] = []
    for name in ("title", "description"):
        value = item.get(name)
        if not isinstance(value, str) or not value.strip():
            errors.append(f"{where}: {name!r} must be a non-empty string")
    assignee = item.get("assignee")
    if assignee is not None and not isinstance(assignee, str):
        errors.append(f"{where}: 'assignee' must be a string")
    deps = item.get("dependsOn")
    if deps is not None and (
        not isinstance(deps, list) or not all(isinstance(dep, str) for dep in deps)
    ):
        errors.append(f"{where}: 'dependsOn' must be an array of task titles")
    retries = item.get("maxRetries")
    if retries is not None and (
        not isinstance(retries, int) or isinstance(retries, bool) or retries < 0
    ):
        errors.append(f"{where}: 'maxRetries' must be a non-negative integer")
    return errors

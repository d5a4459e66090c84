"""Parsing and validating the coordinator's task list as OMA's schema does (spec CD-02). Pure.

OMA validates the coordinator's reply with one zod schema (``coordinator.ts``
``buildCoordinatorTaskSpecsSchema``): a non-empty array of strict task objects whose strings are
trimmed, then roster, dependency, duplicate-title and cycle checks over the trimmed values. The
checks below follow it field by field, with zod v3's issue messages, so the repair request
quotes what OMA's would (``agent/structured-output.ts`` ``validateOutput``: ``path: message``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oma_actors.domain.tasks import Task
from oma_actors.errors import TaskGraphError
from oma_actors.jsontext import reject_constant
from oma_actors.orchestration.graph import check_acyclic

if TYPE_CHECKING:
    from collections.abc import Sequence

PLAN_INVALID = "COORDINATOR_PLAN_INVALID"

# OMA's regexes are case-sensitive: a ```JSON fence is read as a bare one.
_JSON_FENCE = re.compile(r"```json\s*(.*?)```", re.DOTALL)
_ANY_FENCE = re.compile(r"```\s*(.*?)```", re.DOTALL)
# What JavaScript's String.prototype.trim removes (Python's str.strip differs at the edges).
JS_WHITESPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"  # noqa: E501

Path = tuple[str | int, ...]
_MISSING: Any = object()
_INVALID: Any = object()  # zod's INVALID: a type error aborts the value (no refinement runs)


@dataclass(frozen=True, slots=True)
class PlanProblem:
    """Why a task list was refused.

    Attributes:
        code: the OMA error code (``COORDINATOR_PLAN_INVALID`` for a reply the schema refuses).
        errors: each problem found (``path: message`` lines for a schema failure).
        message: OMA's error message, which the repair request quotes.
    """

    code: str
    errors: tuple[str, ...]
    message: str


def parse_task_list(text: str, roster: Sequence[str]) -> list[Task] | PlanProblem:
    """Turn the coordinator's reply into tasks with fresh ids, or say what is wrong.

    Dependencies stay titles (trimmed); the queue resolves them. Fields OMA's schema accepts
    that a ``Task`` does not hold (``memoryScope``, ``role``, ``priority``, ``requires``,
    ``verify``) are validated, then dropped.
    """
    try:
        data = extract_json(text)
    except json.JSONDecodeError:
        body = text.strip(JS_WHITESPACE)
        message = f'Failed to extract JSON from output. Raw output begins with: "{body[:100]}"'
        return PlanProblem(PLAN_INVALID, (message,), message)
    issues: list[str] = []
    specs = _task_list(issues, data)
    if specs is not _INVALID:
        _refine(issues, specs, set(roster))
    if issues:
        listed = "\n".join(f"  - {issue}" for issue in issues)
        return PlanProblem(PLAN_INVALID, tuple(issues), f"Output validation failed:\n{listed}")
    return [_task(spec) for spec in specs]


def extract_json(text: str) -> Any:
    """The JSON value in a model's reply, found as OMA's structured output finds it.

    Models wrap JSON in prose and fences. Tried in order, the first that parses wins: the whole
    reply; the first fence marked ``json`` in it; the first fence of any kind; the text from
    the first ``{`` to the last ``}``; from the first ``[`` to the last ``]``. Parsed as
    JavaScript's ``JSON.parse`` parses: ``NaN`` and ``Infinity`` are no JSON.

    Raises:
        json.JSONDecodeError: none of them parses (the whole reply's error).
    """
    body = text.strip(JS_WHITESPACE)
    try:
        return _loads(body)
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
                return _loads(candidate.strip(JS_WHITESPACE))
            except json.JSONDecodeError:
                continue
        raise first from None


def _loads(text: str) -> Any:
    """``JSON.parse``'s reading: a constant Python reads (``NaN``, ``Infinity``) is no JSON."""
    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # a constant (its name is the message's first word)
        name = str(exc).split(" ", 1)[0]
        raise json.JSONDecodeError(str(exc), text, text.find(name)) from None


# -- zod's checks, one function per schema kind ----------------------------------------------

Check = Callable[[list[str], Path, Any], Any]


def _add(issues: list[str], path: Path, message: str) -> None:
    issues.append(f"{'.'.join(str(part) for part in path) if path else '(root)'}: {message}")


def _kind(value: Any) -> str:
    """zod's name for the type of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _wrong(issues: list[str], path: Path, value: Any, expected: str) -> Any:
    message = "Required" if value is _MISSING else f"Expected {expected}, received {_kind(value)}"
    _add(issues, path, message)
    return _INVALID


def _string(issues: list[str], path: Path, value: Any) -> Any:
    """``z.string().trim().min(1)``: the trimmed text; empty is an issue, not an abort."""
    if not isinstance(value, str):
        return _wrong(issues, path, value, "string")
    text = value.strip(JS_WHITESPACE)
    if not text:
        _add(issues, path, "String must contain at least 1 character(s)")
    return text


def _strings(issues: list[str], path: Path, value: Any) -> Any:
    if not isinstance(value, list):
        return _wrong(issues, path, value, "array")
    items = [_string(issues, (*path, index), item) for index, item in enumerate(value)]
    return _INVALID if any(item is _INVALID for item in items) else items


def _number(*, integer: bool = False, finite: bool = False, positive: bool = False) -> Check:
    """``z.number()`` with ``.int()`` or ``.finite()``, then ``.nonnegative()``/``.positive()``."""

    def check(issues: list[str], path: Path, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _wrong(issues, path, value, "number")
        whole = math.isfinite(value) and float(value).is_integer()
        if integer and not whole:
            _add(issues, path, "Expected integer, received float")
        if finite and not math.isfinite(value):
            _add(issues, path, "Number must be finite")
        if positive and not value > 0:
            _add(issues, path, "Number must be greater than 0")
        elif not positive and value < 0:
            _add(issues, path, "Number must be greater than or equal to 0")
        return int(value) if integer and whole else value

    return check


def _enum(*options: str) -> Check:
    listed = " | ".join(f"'{option}'" for option in options)

    def check(issues: list[str], path: Path, value: Any) -> Any:
        if not isinstance(value, str):
            return _wrong(issues, path, value, listed)
        if value not in options:
            _add(issues, path, f"Invalid enum value. Expected {listed}, received '{value}'")
            return _INVALID
        return value

    return check


def _strict(shape: Mapping[str, Check], required: frozenset[str] = frozenset()) -> Check:
    """``z.object(shape).strict()``: fields in shape order, then the unknown keys."""

    def check(issues: list[str], path: Path, value: Any) -> Any:
        if not isinstance(value, dict):
            return _wrong(issues, path, value, "object")
        out: dict[str, Any] = {}
        for key, field_check in shape.items():
            if key in value:
                out[key] = field_check(issues, (*path, key), value[key])
            elif key in required:
                out[key] = _wrong(issues, (*path, key), _MISSING, "")
        unknown = [key for key in value if key not in shape]
        if unknown:
            listed = ", ".join(f"'{key}'" for key in unknown)
            _add(issues, path, f"Unrecognized key(s) in object: {listed}")
        return _INVALID if any(item is _INVALID for item in out.values()) else out

    return check


_VERIFY_OBJECT = _strict(
    {
        "mode": _enum("refute", "lens"),
        "quorum": _number(integer=True, positive=True),
        "maxRounds": _number(integer=True, positive=True),
        "onDissent": _enum("revise", "reject", "keep"),
    }
)


def _verify(issues: list[str], path: Path, value: Any) -> Any:
    """``z.union([z.literal(true), object])``: an object's own issues, else "Invalid input"."""
    if value is True:
        return True
    own: list[str] = []
    parsed = _VERIFY_OBJECT(own, path, value)
    if parsed is _INVALID:
        _add(issues, path, "Invalid input")
        return _INVALID
    issues.extend(own)
    return parsed


_TASK = _strict(
    {
        "title": _string,
        "description": _string,
        "assignee": _string,
        "dependsOn": _strings,
        "memoryScope": _enum("dependencies", "all"),
        "maxRetries": _number(integer=True),
        "retryDelayMs": _number(finite=True),
        "retryBackoff": _number(finite=True, positive=True),
        "role": _string,
        "priority": _enum("low", "normal", "high", "critical"),
        "requires": _strict(
            {
                "requiredTools": _strings,
                "requiredCapabilities": _strings,
                "requiredBackend": _enum("llm", "process", "acp"),
                "requiredProvider": _string,
            }
        ),
        "verify": _verify,
    },
    required=frozenset({"title", "description"}),
)


def _task_list(issues: list[str], data: Any) -> Any:
    """``z.array(task).min(1)``: every element checked; a type error anywhere aborts."""
    if not isinstance(data, list):
        return _wrong(issues, (), data, "array")
    if not data:
        _add(issues, (), "Array must contain at least 1 element(s)")
    specs = [_TASK(issues, (index,), item) for index, item in enumerate(data)]
    return _INVALID if any(spec is _INVALID for spec in specs) else specs


def _refine(issues: list[str], specs: list[dict[str, Any]], roster: set[str]) -> None:
    """OMA's ``superRefine``: roster, dependency titles, duplicate titles, then cycles."""

    def key(title: str) -> str:
        return title.lower().strip(JS_WHITESPACE)

    by_title: dict[str, list[int]] = {}
    for index, spec in enumerate(specs):
        by_title.setdefault(key(spec["title"]), []).append(index)
    for index, spec in enumerate(specs):
        assignee = spec.get("assignee")
        if assignee is not None and assignee not in roster:
            _add(issues, (index, "assignee"), f'Unknown assignee "{assignee}".')
        for position, dependency in enumerate(spec.get("dependsOn") or ()):
            matches = len(by_title.get(key(dependency), ()))
            if matches != 1:
                word = "Unknown" if matches == 0 else "Ambiguous"
                _add(issues, (index, "dependsOn", position), f'{word} dependency "{dependency}".')
    for title, indexes in by_title.items():
        if len(indexes) > 1:
            for index in indexes:
                _add(issues, (index, "title"), f'Duplicate task title "{title}".')
    if _has_cycle(specs, by_title, key):
        _add(issues, (), "Cyclic task dependency detected.")


def _has_cycle(
    specs: list[dict[str, Any]], by_title: dict[str, list[int]], key: Callable[[str], str]
) -> bool:
    """Whether the edges of unambiguous titles form a cycle (a self-dependency included)."""
    graph: dict[str, list[str]] = {}
    for index, spec in enumerate(specs):
        targets = [by_title.get(key(dependency), []) for dependency in spec.get("dependsOn") or ()]
        graph[str(index)] = [str(found[0]) for found in targets if len(found) == 1]
    try:
        check_acyclic(graph, {})
    except TaskGraphError:
        return True
    return False


def _task(spec: Mapping[str, Any]) -> Task:
    """A validated spec as a task (``loadSpecsIntoQueue``), OMA's defaults where it has none."""
    delay = spec.get("retryDelayMs")
    return Task(
        spec["title"],
        spec["description"],
        assignee=spec.get("assignee"),
        depends_on=spec.get("dependsOn") or (),
        max_retries=spec.get("maxRetries", 0),
        # ``Task.retry_delay_ms`` is whole milliseconds; OMA rounds the delay it waits anyway.
        retry_delay_ms=delay if delay is None or isinstance(delay, int) else round(delay),
        retry_backoff=spec.get("retryBackoff"),
    )

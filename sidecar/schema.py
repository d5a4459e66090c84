"""Input models for host tools, built from the JSON Schema the host registered.

A host describes a tool's input with a JSON Schema; OMA tools take a pydantic model. Translating
arbitrary JSON Schema into pydantic fields is lossy (``anyOf``, patterns, nested objects) and
would change the schema the model is shown. So the model here is permissive
(``extra="allow"``), validates with the ``jsonschema`` library (draft 2020-12) before pydantic
sees the data, and reports the host's schema verbatim from ``model_json_schema``. Invalid input
raises a pydantic ``ValidationError`` whose message lists JSON paths, which the runtime turns
into an error tool result for the model: the host never sees it.

Validation must stay cheap whatever the schema and the input (issue 12 item 2, issue 24 item 2):

- ``pattern`` (and ``patternProperties``, ``additionalProperties`` beside them) is matched with
  RE2, whose time is linear in the input (Python's ``re`` backtracks: ``^(a+)+$`` against 28
  "a"s and a "!" froze every run and RPC for 21 s); each schema's patterns are compiled once,
  when its model is built, so no shared cache can be thrashed into recompiling;
- a schema is bounded when it is registered (``schema_problem``): its bytes, its subschemas,
  its distinct patterns and its nesting; an input is bounded by its bytes of JSON
  (``TooLargeError`` names which of the two is over);
- one validation is bounded by a step budget (keyword applications): the model's own check,
  on the event loop, gets ``LOOP_STEPS``; input costlier than that is checked again by the
  tool's ``execute`` in a worker thread (``check_off_loop``) with ``THREAD_STEPS`` and a time
  budget, so one hostile schema x input neither freezes RPCs nor runs without end.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

import re2  # type: ignore[import-untyped]
from jsonschema import Draft202012Validator, ValidationError, validators
from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping
    from typing import TypeAlias

    Errors: TypeAlias = Iterator[ValidationError]
    Keyword: TypeAlias = Callable[..., Errors]

MAX_ERRORS = 8
MAX_DEPTH = 32  # nested objects and arrays of a schema
MAX_PATTERN = 4096  # characters of one pattern
MAX_SCHEMA_BYTES = 64 * 1024  # a schema's compact JSON
MAX_INSTANCE_BYTES = 1 << 20  # one input's compact JSON
MAX_SUBSCHEMAS = 1000  # JSON objects in a schema
MAX_PATTERNS = 100  # distinct patterns (pattern and patternProperties keys) in a schema
LOOP_STEPS = 2_000
"""Keyword applications one check may take on the event loop (tens of milliseconds)."""
THREAD_STEPS = 1_000_000
"""Keyword applications the worker-thread check may take."""
THREAD_SECONDS = 5.0
"""Seconds the worker-thread check may take."""
_RE2_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern
# Keywords whose evaluation in jsonschema matches patternProperties with Python's re.
_REFUSED = ("unevaluatedProperties", "unevaluatedItems")


class TooCostlyError(Exception):
    """A validation ran out of its step or time budget before it decided."""

    def __init__(self, steps: int, seconds: float | None = None) -> None:
        spent = f"{seconds:g} seconds" if seconds is not None else f"{steps} steps"
        super().__init__(f"checking the input against the schema took over {spent}")
        self.steps = steps
        self.seconds = seconds


class TooLargeError(ValueError):
    """A schema or an input is over its size budget; ``what`` names which.

    A ``ValueError``: inside the input model's check pydantic reports it as a validation error.
    """

    def __init__(self, what: Literal["schema", "input"], size: int, limit: int) -> None:
        noun = "input schema" if what == "schema" else "input"
        super().__init__(f"the {noun} is {size} bytes of JSON, over the limit of {limit}")
        self.what = what
        self.size = size
        self.limit = limit


def _check_size(what: Literal["schema", "input"], value: object, limit: int) -> None:
    """Raise ``TooLargeError`` when ``value``'s compact JSON is over ``limit`` bytes."""
    try:
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    except (TypeError, ValueError):  # not JSON at all: the type checks report what is wrong
        return
    if size > limit:
        raise TooLargeError(what, size, limit)


@dataclass(slots=True)
class _Budget:
    steps: int
    limit: int
    seconds: float | None = None
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.seconds is not None:
            self.deadline = time.monotonic() + self.seconds

    def spend(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise TooCostlyError(self.limit)
        # Every 1024 steps: reading the clock costs more than a step.
        if (
            self.deadline is not None
            and self.steps % 1024 == 0
            and time.monotonic() > self.deadline
        ):
            raise TooCostlyError(self.limit - self.steps, self.seconds)


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "oma_schema_budget", default=None
)


@functools.lru_cache(maxsize=256)
def schema_text_problem(text: str) -> str | None:
    """Why the JSON ``text`` cannot be a tool's input schema, or ``None`` if it can.

    The verdict is cached per text: checking a schema against the draft 2020-12 meta-schema
    takes up to seconds for a large one, so the RPCs that register schemas compute it in a
    worker thread first (``check_off_loop_schemas``) and the check on the event loop finds it
    here. Texts over twice ``MAX_SCHEMA_BYTES`` are refused unparsed (and not cached).
    """
    if len(text) > 2 * MAX_SCHEMA_BYTES:
        return f"input schema is {len(text)} characters of JSON, over the limit"
    try:
        schema = json.loads(text)
    except RecursionError:
        return "input_schema_json is not JSON: nested too deeply"
    except ValueError as exc:
        return f"input_schema_json is not JSON: {exc}"
    return schema_problem(schema)


async def check_off_loop_schemas(texts: Iterable[str]) -> None:
    """Compute (and cache) ``schema_text_problem`` of ``texts`` in a worker thread."""
    pending = [text for text in texts if text]
    if pending:
        await asyncio.to_thread(lambda: [schema_text_problem(text) for text in pending])


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` cannot be a tool's input schema, or ``None`` if it can."""
    if not isinstance(schema, dict):
        return "input schema must be a JSON object"
    if schema.get("type", "object") != "object":
        return 'input schema must have "type": "object"'
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not all(
        isinstance(v, dict) for v in properties.values()
    ):
        return '"properties" must map names to schemas'
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return '"required" must be a list of property names'
    if "pattern" in schema and not isinstance(schema["pattern"], str):
        return '"pattern" must be a string'
    problem = _nested_problem(schema)  # first: it bounds the depth json.dumps recurses to
    if problem is not None:
        return problem
    try:
        _check_size("schema", schema, MAX_SCHEMA_BYTES)
    except TooLargeError as exc:
        return str(exc)
    error = next(iter(_META.iter_errors(schema)), None)
    if error is not None:
        return f"not a valid JSON Schema (draft 2020-12) at {_path(error)}: {error.message}"
    return None


def _nested_problem(schema: dict[str, Any]) -> str | None:
    """A too deep or too large schema, or a pattern that is not a linear-time regex."""
    # Iterative: a schema nested thousands deep must be refused, not overflow the stack.
    stack: list[tuple[object, int]] = [(schema, 1)]
    objects = 0
    patterns: set[str] = set()
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"input schema nests deeper than {MAX_DEPTH} levels"
        if isinstance(node, dict):
            objects += 1
            if objects > MAX_SUBSCHEMAS:
                return f"input schema has more than {MAX_SUBSCHEMAS} subschemas"
            for keyword in _REFUSED:
                if keyword in node:
                    return f'"{keyword}" is not supported in input schemas'
            # Only a string can be a pattern: {"properties": {"pattern": {...}}} names a field.
            found = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
            if isinstance(node.get("patternProperties"), dict):
                found.extend(node["patternProperties"])
            for pattern in found:
                problem = pattern_problem(pattern)
                if problem is not None:
                    return problem
                patterns.add(pattern)
            if len(patterns) > MAX_PATTERNS:
                return f"input schema has more than {MAX_PATTERNS} distinct patterns"
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
    return None


def pattern_problem(pattern: object) -> str | None:
    """Why ``pattern`` cannot be a schema's ``pattern``, or ``None`` if it can."""
    if not isinstance(pattern, str):
        return '"pattern" must be a string'
    if len(pattern) > MAX_PATTERN:
        return f'"pattern" is longer than {MAX_PATTERN} characters'
    try:
        _compile(pattern)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        return (
            f"invalid pattern {pattern!r}: {text} (patterns are matched in linear time with "
            "RE2: no lookaround or backreferences)"
        )
    return None


def _compile(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported to the host, not logged by RE2
    options.max_mem = _RE2_MEMORY
    return re2.compile(pattern, options=options)


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """A registered input schema with its validator and its patterns, compiled once."""

    schema: dict[str, Any]
    validator: Any = field(repr=False)


def compile_schema(schema: dict[str, Any]) -> CompiledSchema:
    """``schema`` ready to validate input (``schema_problem(schema)`` must be ``None``).

    Raises:
        TooLargeError: the schema is over ``MAX_SCHEMA_BYTES`` (``what == "schema"``).
    """
    _check_size("schema", schema, MAX_SCHEMA_BYTES)
    patterns: dict[str, Any] = {}

    def compiled(pattern: str) -> Any:
        found = patterns.get(pattern)
        if found is None:  # only patterns of this schema: at most MAX_PATTERNS of them
            found = patterns[pattern] = _compile(pattern)
        return found

    keywords = _keywords(compiled)
    base: dict[str, Keyword] = dict(Draft202012Validator.VALIDATORS)
    base.update(keywords)
    counted = {name: _counted(check) for name, check in base.items()}
    cls = validators.extend(Draft202012Validator, counted)  # type: ignore[no-untyped-call]
    return CompiledSchema(schema=schema, validator=cls(schema))


def _counted(
    check: Keyword,
) -> Keyword:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Errors:
        budget = _budget.get()
        if budget is not None:
            budget.spend()
        yield from check(validator, value, instance, schema)

    return counted


def validate(
    schema: dict[str, Any] | CompiledSchema, value: object, *, steps: int = LOOP_STEPS
) -> list[str]:
    """Problems of ``value`` against ``schema``, as messages naming JSON paths.

    Raises:
        TooCostlyError: deciding took more than ``steps`` keyword applications.
        TooLargeError: the schema or the input is over its size budget (``what`` says which).
    """
    compiled = schema if isinstance(schema, CompiledSchema) else compile_schema(schema)
    return _problems(compiled, value, _Budget(steps, steps))


def _problems(compiled: CompiledSchema, value: object, budget: _Budget) -> list[str]:
    _check_size("input", value, MAX_INSTANCE_BYTES)
    token = _budget.set(budget)
    try:
        problems: list[str] = []
        for error in compiled.validator.iter_errors(value):
            problems.append(f"{_path(error)}: {error.message}")
            if len(problems) >= MAX_ERRORS:
                break
        return problems
    except RecursionError:  # a "$ref" cycle through the same value
        return ["$: the schema refers to itself without end"]
    finally:
        _budget.reset(token)


async def check_off_loop(
    compiled: CompiledSchema,
    value: object,
    *,
    steps: int = THREAD_STEPS,
    seconds: float = THREAD_SECONDS,
) -> list[str]:
    """``validate`` in a worker thread, within ``steps`` and ``seconds``.

    Raises:
        TooCostlyError: the budget ran out first.
        TooLargeError: the input is over ``MAX_INSTANCE_BYTES``.
    """

    def run() -> list[str]:
        return _problems(compiled, value, _Budget(steps, steps, seconds))

    return await asyncio.to_thread(run)


def _path(error: ValidationError) -> str:
    text = "$"
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _keywords(
    compiled: Callable[[str], Any],
) -> dict[str, Keyword]:
    """The keywords whose checks or messages differ from jsonschema's own."""

    def type_(validator: Any, types: Any, instance: Any, schema: Any) -> Errors:
        names = types if isinstance(types, list) else [types]
        if not any(validator.is_type(instance, name) for name in names):
            yield ValidationError(f"expected {' or '.join(map(str, names))}")

    def reworded(keyword: str, message: Callable[[Any], str]) -> Keyword:
        # jsonschema's own check (JSON equality: true is not 1, also inside arrays), with
        # the message this module has always given.
        check = Draft202012Validator.VALIDATORS[keyword]

        def checked(validator: Any, value: Any, instance: Any, schema: Any) -> Errors:
            for _ in check(validator, value, instance, schema):
                yield ValidationError(message(value))
                return

        return checked

    def any_of(validator: Any, options: Any, instance: Any, schema: Any) -> Errors:
        # is_valid stops at a branch's first error; jsonschema's anyOf collects all of them.
        if not any(validator.evolve(schema=sub).is_valid(instance) for sub in options):
            yield ValidationError("matches none of the anyOf schemas")

    def one_of(validator: Any, options: Any, instance: Any, schema: Any) -> Errors:
        passing = 0
        for sub in options:
            passing += validator.evolve(schema=sub).is_valid(instance)
            if passing > 1:
                yield ValidationError("matches more than one oneOf schema")
                return
        if passing == 0:
            yield ValidationError("matches none of the oneOf schemas")

    def required(validator: Any, names: Any, instance: Any, schema: Any) -> Errors:
        if validator.is_type(instance, "object"):
            for name in names:
                if name not in instance:
                    yield ValidationError("required", path=[name])

    def extras(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
        properties = schema.get("properties", {})
        patterns = [compiled(pattern) for pattern in schema.get("patternProperties", {})]
        for name in instance:
            if name in properties or any(p.search(name) for p in patterns):
                continue
            yield name

    def additional(validator: Any, extra: Any, instance: Any, schema: Any) -> Errors:
        if not validator.is_type(instance, "object"):
            return
        for name in extras(instance, schema):
            if extra is False:
                yield ValidationError("unexpected property", path=[name])
            elif isinstance(extra, dict):
                yield from validator.descend(instance[name], extra, path=name)

    def pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Errors:
        if not validator.is_type(instance, "object"):
            return
        for pattern, sub in patterns.items():
            matcher = compiled(pattern)
            for name, item in instance.items():
                if matcher.search(name):
                    yield from validator.descend(item, sub, path=name, schema_path=pattern)

    def pattern(validator: Any, regex: Any, instance: Any, schema: Any) -> Errors:
        if validator.is_type(instance, "string") and compiled(regex).search(instance) is None:
            yield ValidationError(f"does not match pattern {regex!r}")

    def bound(words: str, broken: Callable[[float, float], bool]) -> Keyword:
        def check(validator: Any, limit: Any, instance: Any, schema: Any) -> Errors:
            if validator.is_type(instance, "number") and broken(instance, limit):
                yield ValidationError(f"{words} {limit}")

        return check

    def length(words: str, broken: Callable[[int, int], bool], kind: str, unit: str) -> Keyword:
        def check(validator: Any, limit: Any, instance: Any, schema: Any) -> Errors:
            if validator.is_type(instance, kind) and broken(len(instance), limit):
                yield ValidationError(f"{words} {limit}{unit}")

        return check

    return {
        "type": type_,
        "enum": reworded("enum", lambda options: f"must be one of {options!r}"),
        "const": reworded("const", lambda value: f"must be {value!r}"),
        "anyOf": any_of,
        "oneOf": one_of,
        "required": required,
        "additionalProperties": additional,
        "patternProperties": pattern_properties,
        "pattern": pattern,
        "minimum": bound("less than", lambda v, lim: v < lim),
        "maximum": bound("greater than", lambda v, lim: v > lim),
        "exclusiveMinimum": bound("at most", lambda v, lim: v <= lim),
        "exclusiveMaximum": bound("at least", lambda v, lim: v >= lim),
        "minItems": length("needs at least", lambda n, lim: n < lim, "array", " items"),
        "maxItems": length("allows at most", lambda n, lim: n > lim, "array", " items"),
        "minLength": length("shorter than", lambda n, lim: n < lim, "string", " characters"),
        "maxLength": length("longer than", lambda n, lim: n > lim, "string", " characters"),
    }


_META = Draft202012Validator(Draft202012Validator.META_SCHEMA)  # no format checks: no Python re


def input_model(tool_name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that validates against ``schema`` and reports it as its JSON schema.

    Input whose check needs more than ``LOOP_STEPS`` passes the model unchecked, marked so
    (``unchecked``): the host tool's ``execute`` checks it off the event loop before the host
    gets it.
    """
    frozen_schema = copy.deepcopy(schema)
    compiled = compile_schema(frozen_schema)

    class HostToolInput(BaseModel):
        model_config = ConfigDict(extra="allow")
        schema_compiled: ClassVar[CompiledSchema] = compiled
        _unchecked: bool = PrivateAttr(default=False)

        @model_validator(mode="wrap")
        @classmethod
        def _json_schema_check(cls, data: Any, handler: Any) -> Any:
            try:
                problems = validate(compiled, data)
            except TooCostlyError:
                model = handler(data)
                model._unchecked = True
                return model
            if problems:
                raise ValueError("; ".join(problems))
            return handler(data)

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            """The host's schema, exactly as registered."""
            return copy.deepcopy(frozen_schema)

    HostToolInput.__name__ = HostToolInput.__qualname__ = f"HostToolInput_{tool_name}"
    return HostToolInput


def unchecked(args: BaseModel) -> CompiledSchema | None:
    """The schema ``args`` still has to be checked against off the loop, if any."""
    if not getattr(args, "_unchecked", False):
        return None
    compiled = getattr(type(args), "schema_compiled", None)
    return compiled if isinstance(compiled, CompiledSchema) else None

"""Input models for host tools, built from the JSON Schema the host registered.

A host describes a tool's input with a JSON Schema; OMA tools take a pydantic model. Translating
arbitrary JSON Schema into pydantic fields is lossy (``anyOf``, patterns, nested objects) and
would change the schema the model is shown. So the model here is permissive
(``extra="allow"``), validates with a small JSON Schema checker before pydantic sees the data,
and reports the host's schema verbatim from ``model_json_schema``. Invalid input raises a
pydantic ``ValidationError`` whose message lists JSON paths, which the runtime turns into an
error tool result for the model: the host never sees it.

Validation runs on the event loop, inside the model's turn, so it must be cheap whatever the
schema and the input: ``pattern`` is matched with RE2, whose time is linear in the input (Python's
``re`` backtracks: ``^(a+)+$`` against 28 "a"s and a "!" froze every run and RPC for 21 s), and a
schema may nest at most ``MAX_DEPTH`` levels. A pattern RE2 cannot express (lookaround,
backreferences) is refused when the tool is registered.
"""

from __future__ import annotations

import copy
import functools
import math
from typing import Any

import re2  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, model_validator

MAX_ERRORS = 8
MAX_DEPTH = 32  # nested objects and arrays of a schema
MAX_PATTERN = 4096  # characters of one pattern
_RE2_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
}


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
    return _nested_problem(schema)


def _nested_problem(schema: dict[str, Any]) -> str | None:
    """A too deep schema or a pattern that is not a string or not a linear-time regex."""
    # Iterative: a schema nested thousands deep must be refused, not overflow the stack.
    stack: list[tuple[object, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"input schema nests deeper than {MAX_DEPTH} levels"
        if isinstance(node, dict):
            # Only a string can be a pattern: {"properties": {"pattern": {...}}} names a field.
            if isinstance(node.get("pattern"), str):
                problem = pattern_problem(node["pattern"])
                if problem is not None:
                    return problem
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
        _compiled(pattern)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        return (
            f"invalid pattern {pattern!r}: {text} (patterns are matched in linear time with "
            "RE2: no lookaround or backreferences)"
        )
    return None


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported to the host, not logged by RE2
    options.max_mem = _RE2_MEMORY
    return re2.compile(pattern, options=options)


def validate(schema: dict[str, Any], value: object, path: str = "$") -> list[str]:
    """Problems of ``value`` against ``schema`` (a practical JSON Schema subset), as messages."""
    errors: list[str] = []
    _check(schema, value, path, errors)
    return errors[:MAX_ERRORS]


def _is_type(value: object, name: str) -> bool:
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    kinds = _TYPES.get(name)
    if kinds is None:
        return True  # an unknown type name constrains nothing
    if name != "boolean" and isinstance(value, bool):
        return False
    return isinstance(value, kinds)


def _check(schema: object, value: object, path: str, errors: list[str]) -> None:
    if not isinstance(schema, dict) or len(errors) >= MAX_ERRORS:
        if schema is False:
            errors.append(f"{path}: no value is allowed here")
        return
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, str(name)) for name in names):
            errors.append(f"{path}: expected {' or '.join(map(str, names))}")
            return
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        errors.append(f"{path}: must be one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: must be {schema['const']!r}")
    _check_combinators(schema, value, path, errors)
    if isinstance(value, dict):
        _check_object(schema, value, path, errors)
    elif isinstance(value, list):
        _check_array(schema, value, path, errors)
    elif isinstance(value, str):
        _check_string(schema, value, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, float(value), path, errors)


def _check_combinators(schema: dict[str, Any], value: object, path: str, errors: list[str]) -> None:
    for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        _check(sub, value, path, errors)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if not isinstance(options, list) or not options:
            continue
        passing = sum(1 for sub in options if not validate(sub, value, path))
        if passing == 0:
            errors.append(f"{path}: matches none of the {key} schemas")
        elif key == "oneOf" and passing > 1:
            errors.append(f"{path}: matches more than one oneOf schema")


def _check_object(
    schema: dict[str, Any], value: dict[str, Any], path: str, errors: list[str]
) -> None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if name not in value:
            errors.append(f"{path}.{name}: required")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            _check(properties[name], item, f"{path}.{name}", errors)
        elif extra is False:
            errors.append(f"{path}.{name}: unexpected property")
        elif isinstance(extra, dict):
            _check(extra, item, f"{path}.{name}", errors)


def _check_array(schema: dict[str, Any], value: list[Any], path: str, errors: list[str]) -> None:
    low, high = schema.get("minItems"), schema.get("maxItems")
    if isinstance(low, int) and len(value) < low:
        errors.append(f"{path}: needs at least {low} items")
    if isinstance(high, int) and len(value) > high:
        errors.append(f"{path}: allows at most {high} items")
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _check(items, item, f"{path}[{index}]", errors)


def _check_string(schema: dict[str, Any], value: str, path: str, errors: list[str]) -> None:
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(value) < low:
        errors.append(f"{path}: shorter than {low} characters")
    if isinstance(high, int) and len(value) > high:
        errors.append(f"{path}: longer than {high} characters")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and _compiled(pattern).search(value) is None:
        errors.append(f"{path}: does not match pattern {pattern!r}")


def _check_number(schema: dict[str, Any], value: float, path: str, errors: list[str]) -> None:
    if not math.isfinite(value):
        errors.append(f"{path}: must be finite")
        return
    for key, words in _BOUNDS:
        limit = schema.get(key)
        if not isinstance(limit, int | float) or isinstance(limit, bool):
            continue
        broken = {
            "minimum": value < limit,
            "maximum": value > limit,
            "exclusiveMinimum": value <= limit,
            "exclusiveMaximum": value >= limit,
        }[key]
        if broken:
            errors.append(f"{path}: {words} {limit}")


_BOUNDS = (
    ("minimum", "less than"),
    ("maximum", "greater than"),
    ("exclusiveMinimum", "at most"),
    ("exclusiveMaximum", "at least"),
)


def input_model(tool_name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that validates against ``schema`` and reports it as its JSON schema."""
    frozen_schema = copy.deepcopy(schema)

    class HostToolInput(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _json_schema_check(cls, data: Any) -> Any:
            problems = validate(frozen_schema, data)
            if problems:
                raise ValueError("; ".join(problems))
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            """The host's schema, exactly as registered."""
            return copy.deepcopy(frozen_schema)

    HostToolInput.__name__ = HostToolInput.__qualname__ = f"HostToolInput_{tool_name}"
    return HostToolInput

"""Host tool input models: JSON Schema validation, and the schema shown to the model verbatim."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sidecar.schema import input_model, schema_problem, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2, "pattern": "^[A-Z]"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "units": {"enum": ["c", "f"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "where": {"anyOf": [{"type": "string"}, {"type": "object", "required": ["lat"]}]},
    },
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({}, "$.city: required"),
        ({"city": 3}, "$.city: expected string"),
        ({"city": "x"}, "$.city: shorter than 2"),
        ({"city": "paris"}, "$.city: does not match pattern"),
        ({"city": "Paris", "days": 0}, "$.days: less than 1"),
        ({"city": "Paris", "days": 2.5}, "$.days: expected integer"),
        ({"city": "Paris", "days": True}, "$.days: expected integer"),
        ({"city": "Paris", "units": "k"}, "$.units: must be one of"),
        ({"city": "Paris", "tags": ["a", 1]}, "$.tags[1]: expected string"),
        ({"city": "Paris", "tags": ["a", "b", "c"]}, "$.tags: allows at most 2"),
        ({"city": "Paris", "where": {}}, "$.where: matches none of the anyOf"),
        ({"city": "Paris", "extra": 1}, "$.extra: unexpected property"),
        ([], "$: expected object"),
    ],
)
def test_invalid_values_name_the_path(value: object, problem: str) -> None:
    assert any(problem in message for message in validate(SCHEMA, value))


def test_valid_values_pass_and_the_model_keeps_the_input() -> None:
    value = {"city": "Paris", "days": 3, "units": "c", "tags": ["a"], "where": {"lat": 1}}
    assert validate(SCHEMA, value) == []
    model = input_model("weather", SCHEMA)
    assert model.model_validate(value).model_dump() == value
    assert model.model_json_schema() == SCHEMA
    with pytest.raises(ValidationError, match=r"\$\.city: required"):
        model.model_validate({"days": 1})


def test_schema_problems() -> None:
    assert schema_problem({"type": "object"}) is None
    assert schema_problem([]) == "input schema must be a JSON object"
    assert schema_problem({"type": "array"}) is not None
    assert schema_problem({"properties": {"a": 1}}) is not None
    assert schema_problem({"required": "a"}) is not None
    assert schema_problem({"properties": {"a": {"pattern": "("}}}) is not None


def test_patterns_are_matched_in_linear_time() -> None:
    # Python's re backtracks exponentially here (2**5000 steps: this test would never end);
    # RE2 decides in one pass, so the assertions are on the answer, not on a clock.
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
    }
    hostile = "a" * 5000 + "!"
    assert validate(schema, {"s": hostile}) == ["$.s: does not match pattern '^(a+)+$'"]
    assert validate(schema, {"s": "a" * 5000}) == []
    # patternProperties: the hostile name does not match, a matching name is checked.
    assert validate(schema, {hostile: "x"}) == []
    assert validate(schema, {"a" * 5000: "x"}) == [f"$.{'a' * 5000}: expected integer"]


def test_patterns_without_a_linear_time_match_are_refused_at_registration() -> None:
    for pattern in ("(?<=a)b", r"(a)\1", "(?=x)y"):
        problem = schema_problem({"properties": {"a": {"type": "string", "pattern": pattern}}})
        assert problem is not None
        assert "RE2" in problem
    # A property that happens to be called "pattern" is a field, not a regex.
    assert schema_problem({"properties": {"pattern": {"type": "string"}}}) is None
    assert schema_problem({"pattern": 3}) == '"pattern" must be a string'


def test_deeply_nested_schemas_are_refused_without_recursing() -> None:
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(5000):
        deep = {"type": "object", "properties": {"a": deep}}
    assert "deeper than" in (schema_problem(deep) or "")

"""Checks on tool definitions and on model-issued tool input."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

from oma_actors.errors import ConfigurationError, ToolInputError

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_tool_definition(
    *, name: str, input_model: object, effect: str, consequential: object = False
) -> None:
    """Raise ``ConfigurationError`` naming the field when a tool definition is malformed."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"tool name {name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
        )
    if not (isinstance(input_model, type) and issubclass(input_model, BaseModel)):
        raise ConfigurationError(f"tool {name!r}: input_model must be a pydantic BaseModel class")
    if effect not in ("idempotent", "unsafe"):
        raise ConfigurationError(
            f"tool {name!r}: effect must be 'idempotent' or 'unsafe', not {effect!r}"
        )
    if not isinstance(consequential, bool):
        # A truthy string would silently change the approval hash OMA computes for the tool.
        raise ConfigurationError(
            f"tool {name!r}: consequential must be a bool, not {type(consequential).__name__}"
        )


def parse_tool_input(model: type[BaseModel], tool_name: str, raw: dict[str, Any]) -> BaseModel:
    """Validate model-issued input; ``ToolInputError`` lists each failing field."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '<input>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ToolInputError(f"invalid input for tool {tool_name!r}: {problems}") from None

"""Checks on tool definitions and on model-issued tool input."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from oma_actors.domain.messages import UNPARSED_ARGUMENTS
from oma_actors.errors import ConfigurationError, ToolInputError

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# The Anthropic adapter's key for the same thing before both adapters shared one. A conversation
# checkpointed then may still hold such a call, uncommitted, that a restore would run.
_LEGACY_UNPARSED_ARGUMENTS = "_raw_input"

# How much of unparsed arguments the model is shown: enough to see where they broke off, not a
# whole cut-off document echoed back at it.
_QUOTED_CHARS = 200


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
    """Validate model-issued input against the tool's input model.

    Raises:
        ToolInputError: the arguments were not valid JSON (the adapter kept their text under
            ``UNPARSED_ARGUMENTS``: the message quotes the start of it), or fields fail the
            model (the message lists each).
    """
    unparsed = _unparsed_text(raw)
    if unparsed is not None:
        raise ToolInputError(
            f"the arguments for tool {tool_name!r} were not valid JSON (a JSON object is "
            f"required), so it did not run; they read: {_quoted(unparsed)}"
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '<input>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ToolInputError(f"invalid input for tool {tool_name!r}: {problems}") from None


def _unparsed_text(raw: dict[str, Any]) -> str | None:
    for key in (UNPARSED_ARGUMENTS, _LEGACY_UNPARSED_ARGUMENTS):
        if key in raw:
            text = raw[key]
            return text if isinstance(text, str) else json.dumps(text, default=str)
    return None


def _quoted(text: str) -> str:
    if len(text) <= _QUOTED_CHARS:
        return text
    return f"{text[:_QUOTED_CHARS]}... ({len(text) - _QUOTED_CHARS} more characters)"

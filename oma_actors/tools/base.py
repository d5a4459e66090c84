"""Tools: what an agent may call, with a pydantic input model and a declared effect (D1)."""

from __future__ import annotations

import copy
import inspect
import warnings
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from oma_actors.domain.messages import ContentBlock, ToolSpec

if TYPE_CHECKING:
    from pydantic import BaseModel

ToolEffect = Literal["idempotent", "unsafe"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a tool knows about the call it serves.

    ``tool_call_id`` is the model-issued id; a call re-run after a restore gets the same one, so
    ``f"{run_id}:{task_id}:{tool_call_id}"`` works as an external idempotency key (spec RN-09).
    ``fencing_token`` is the run lease's token when the run has a run store: an external system
    that remembers the highest token it has seen can refuse a call from a superseded owner.

    Two counters, because a call can repeat for two reasons: ``task_attempt`` counts the task's
    tries within this run (1, then 2 after a failed try is retried per ``max_retries``), and
    ``run_attempt`` counts the run's attempts (1, then 2 after the first restore), the same
    number as ``TeamRunResult.attempt`` and the journal's ``attempt``.
    """

    run_id: str | None
    task_id: str | None
    tool_call_id: str
    agent_name: str
    task_attempt: int = 1
    run_attempt: int = 1
    fencing_token: int | None = None

    @property
    def attempt(self) -> int:
        """Deprecated: the task's try count; read ``task_attempt`` (or ``run_attempt``)."""
        warnings.warn(
            "ToolContext.attempt is deprecated: it is the task's try count, now "
            "ToolContext.task_attempt; the run's attempt is ToolContext.run_attempt",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.task_attempt

    @property
    def idempotency_key(self) -> str:
        """``run_id:task_id:tool_call_id``, stable across restores of the same call."""
        return f"{self.run_id or ''}:{self.task_id or ''}:{self.tool_call_id}"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns. ``data`` is the model-visible text.

    ``content`` optionally carries rich model-visible parts (text and images, decision D8); when
    set it is sent to the model instead of ``data``.
    """

    data: str
    is_error: bool = field(default=False, kw_only=True)
    content: tuple[ContentBlock, ...] | None = field(default=None, kw_only=True)


ToolExecute = Callable[[Any, ToolContext], Awaitable[ToolResult | str] | ToolResult | str]
"""A tool's body: usually ``async``; a plain function's return value is taken as it is (``settle``),
as OMA's ``await`` takes a plain value."""
ToolReconcile = Callable[[ToolContext], Awaitable[ToolResult | None] | ToolResult | None]


async def settle(value: Awaitable[T] | T) -> T:
    """``value`` awaited when it is awaitable, else ``value`` itself.

    A synchronous ``execute`` has already run its effect when it returns: awaiting its result
    would raise ``TypeError``, which the model would see as the tool failing and could retry,
    repeating an effect that happened. So a plain return value is the tool's result.
    """
    if inspect.isawaitable(value):
        return cast("T", await value)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool definition; build it with :func:`define_tool`."""

    name: str
    description: str
    input_model: type[BaseModel]
    execute: ToolExecute
    effect: ToolEffect = "idempotent"
    consequential: bool = False
    reconcile: ToolReconcile | None = None

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it, with the JSON schema of its input model."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=input_schema(self.input_model),
        )


# pydantic builds a model's JSON schema anew on every call: about 200 us for a one-field
# model, milliseconds for a large one, and every task of every run asks for its tools' specs.
# A model class's schema does not change once the class is built, so it is made once per class
# (weakly held: a class defined per run is not kept alive by this table).
_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model`` (``model_json_schema()``), made once per class.

    Each call returns a copy of its own: a caller (an adapter building a request) may change
    it without changing what the next run sends.
    """
    schema = _SCHEMAS.get(model)
    if schema is None:
        schema = _SCHEMAS[model] = model.model_json_schema()
    return copy.deepcopy(schema)


def define_tool(
    *,
    name: str,
    description: str,
    input_model: type[BaseModel],
    execute: ToolExecute,
    effect: ToolEffect = "idempotent",
    consequential: bool = False,
    reconcile: ToolReconcile | None = None,
) -> Tool:
    """Define a tool.

    Args:
        name: the name the model calls it by (letters, digits, ``_`` and ``-``).
        description: what the tool does, for the model.
        input_model: a pydantic model; model-issued input is validated against it.
        execute: ``async (input, ctx) -> ToolResult | str``; a plain function's return value
            is taken as the result.
        effect: ``"unsafe"`` marks a tool whose effect must not silently repeat (decision D1).
        consequential: OMA's ``consequential``: granting the tool permits real side effects.
            The flag is part of a tool-call approval's content (and so of its hash), and with
            ``OpenMultiAgent(require_consequential_confirmation=True)`` every call of the tool
            needs an ``on_tool_call`` decision (or, in ``run_team``, an approved plan).
        reconcile: for unsafe tools, decides the outcome of a call that may have run before a crash.

    Raises:
        ConfigurationError: an empty or malformed name, a non-pydantic input model, an
            unknown effect, or a ``consequential`` that is not a bool.
    """
    from oma_actors.tools.validation import check_tool_definition

    check_tool_definition(
        name=name, input_model=input_model, effect=effect, consequential=consequential
    )
    return Tool(
        name=name,
        description=description,
        input_model=input_model,
        execute=execute,
        effect=effect,
        consequential=consequential,
        reconcile=reconcile,
    )

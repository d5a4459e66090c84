"""Approval gates: what a gate may answer, and asking one safely (spec AP-01..AP-04)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the boundary proceed."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the boundary, optionally saying why."""

    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Suspend:
    """Stop at the boundary until a reviewer decides (durable approvals)."""

    reason: str | None = None


@dataclass(frozen=True, slots=True)
class GateFailed:
    """The gate raised or answered something that is not a decision."""

    error: str


GateAnswer = bool | Allow | Deny | Suspend
Gate = Callable[..., GateAnswer | Awaitable[GateAnswer]]
Verdict = Allow | Deny | Suspend | GateFailed


async def consult(gate: Gate, *args: object) -> Verdict:
    """Ask ``gate`` (sync or async) and normalise its answer; never raises but cancellation.

    ``True`` means allow and ``False`` deny; an exception or any other answer (including a
    non-string reason) is a ``GateFailed`` naming what went wrong (spec AP-02, AP-03).
    """
    try:
        answer: object = gate(*args)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:  # a gate's failure is a decision input, not a crash of the run
        return GateFailed(f"{type(exc).__name__}: {exc}")
    if answer is True:
        return Allow()
    if answer is False:
        return Deny()
    if isinstance(answer, Allow):
        return answer
    if isinstance(answer, Deny | Suspend):
        if answer.reason is not None and not isinstance(answer.reason, str):
            return GateFailed(f"gate reason must be a string, not {type(answer.reason).__name__}")
        return answer
    return GateFailed(f"gate answered {answer!r}; expected a bool, Allow, Deny or Suspend")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRequest:
    """What ``on_tool_call`` sees: one model-issued call, after its input was validated.

    ``consequential`` is the tool's flag (OMA's ``ToolCallContext.consequential``), so a gate
    can confirm only the calls that permit real side effects.
    """

    run_id: str | None
    task_id: str | None
    agent_name: str
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]
    raw_input: dict[str, Any]
    consequential: bool = False

"""OMA's opt-in confirmation of consequential tool calls (``require_consequential_confirmation``).

A tool defined with ``consequential=True`` permits real side effects. With the option on, OMA
composes a guard with the ``on_tool_call`` gate of ``run_agent`` and ``run_team`` (its
"undeclared" runs; never ``run_tasks`` or ``run_from_plan``, whose structure the caller wrote):

- a call of a tool that is not consequential goes to the gate as before (or runs, with no gate);
- a consequential call goes to the gate, and a ``Deny`` (or a gate that raises) marks the run's
  confirmation as rejected;
- with no gate, a consequential call runs only if ``run_team``'s ``on_plan_ready`` approved the
  plan in this run; otherwise it is denied (the model sees the denial and continues) and the
  run ends ``rejected`` with ``confirmation_required`` set.

The guard classifies by tool metadata alone, as OMA does: never by prompt or argument text.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar, cast

from oma_actors.approvals.gates import Allow, Deny
from oma_actors.domain.results import AgentRunResult, RunOutcome, TeamRunResult

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from oma_actors.agents.config import AgentConfig
    from oma_actors.approvals.gates import Gate, GateAnswer, ToolCallRequest

CONFIRMATION_REQUIRED = "Consequential tool confirmation required before execution."
CONFIRMATION_REJECTED = "Consequential tool confirmation rejected."

Result = TypeVar("Result", AgentRunResult, TeamRunResult)


@dataclass(slots=True)
class ConfirmationState:
    """What the guard learned during one run (shared by every guarded agent of the run).

    Attributes:
        plan_approved: ``on_plan_ready`` allowed the plan, which confirms consequential calls
            that have no ``on_tool_call`` gate to ask.
        confirmation_required: a consequential call was refused for want of any confirmation.
        confirmation_rejected: the gate denied (or failed on) a consequential call.
    """

    plan_approved: bool = False
    confirmation_required: bool = False
    confirmation_rejected: bool = False


def consequential_tools(agents: Iterable[AgentConfig]) -> frozenset[tuple[str, str]]:
    """The ``(agent name, tool name)`` pairs whose tool is granted and consequential."""
    return frozenset(
        (agent.name, tool.name) for agent in agents for tool in agent.tools if tool.consequential
    )


async def _ask(gate: Gate, *args: object) -> GateAnswer:
    """The gate's answer, unchecked: ``consult`` validates whatever the guard passes on."""
    answer: object = gate(*args)
    if inspect.isawaitable(answer):
        answer = await answer
    return cast("GateAnswer", answer)


def guard_tool_gate(
    gate: Gate | None, consequential: Collection[tuple[str, str]], state: ConfirmationState
) -> Gate:
    """``gate`` composed with the confirmation guard (OMA's ``withConsequentialConfirmation``).

    Args:
        gate: the run's ``on_tool_call``, or ``None``.
        consequential: the ``(agent, tool)`` pairs to guard, from ``consequential_tools``.
        state: where the guard records what happened, read by ``confirmed``.

    Returns:
        A gate for the run's ``CallPolicy``; it answers what ``gate`` answers for every call it
        does not refuse itself.
    """

    async def guarded(call: ToolCallRequest) -> GateAnswer:
        if (call.agent_name, call.tool_name) not in consequential:
            return Allow() if gate is None else await _ask(gate, call)
        if gate is not None:
            try:
                answer = await _ask(gate, call)
            except Exception:
                state.confirmation_rejected = True
                raise  # the caller turns a raising gate into an error result the model sees
            if answer is False or isinstance(answer, Deny):
                state.confirmation_rejected = True
            return answer
        if state.plan_approved:
            return Allow()
        state.confirmation_required = True
        return Deny(CONFIRMATION_REQUIRED)

    return guarded


def recording_plan_gate(gate: Gate, state: ConfirmationState) -> Gate:
    """``on_plan_ready`` that also records an allowed plan as the confirmation of this run."""

    async def recorded(*args: object) -> GateAnswer:
        answer = await _ask(gate, *args)
        if answer is True or isinstance(answer, Allow):
            state.plan_approved = True
        return answer

    return recorded


def confirmed(result: Result, state: ConfirmationState | None) -> Result:
    """``result`` as OMA finalizes a guarded run: ``rejected`` when confirmation was missing.

    A call refused for want of confirmation wins over a denied one; without either the result
    is returned unchanged.
    """
    if state is None:
        return result
    if state.confirmation_required:
        status = RunOutcome("rejected", CONFIRMATION_REQUIRED)
        return replace(result, success=False, status=status, confirmation_required=True)
    if state.confirmation_rejected:
        return replace(result, success=False, status=RunOutcome("rejected", CONFIRMATION_REJECTED))
    return result


__all__ = [
    "CONFIRMATION_REJECTED",
    "CONFIRMATION_REQUIRED",
    "ConfirmationState",
    "confirmed",
    "consequential_tools",
    "guard_tool_gate",
    "recording_plan_gate",
]

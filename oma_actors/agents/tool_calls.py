"""What happens to one pending tool call before it runs: reconcile, gate, or durable approval.

``plan_call`` is consulted for every uncommitted call of a turn. It answers ``Execute`` (run the
tool), ``Answer`` (commit this result without running the tool) or ``Park`` (suspend the task on
an approval request). Committed calls never reach it: they are replayed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, assert_never

from oma_actors.approvals import (
    create_approval_request,
    hash_approval_request,
    tool_call_boundary,
    tool_call_content,
)
from oma_actors.approvals.gates import Allow, Deny, GateFailed, Suspend, ToolCallRequest, consult
from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.errors import DurableApprovalError, ToolInputError
from oma_actors.tools.base import ToolResult, settle
from oma_actors.tools.executor import ToolOutcome, outcome_of
from oma_actors.tools.validation import parse_tool_input

if TYPE_CHECKING:
    from collections.abc import Mapping

    from oma_actors.approvals.gates import Gate
    from oma_actors.clock import Clock
    from oma_actors.domain.approvals import ApprovalRequest
    from oma_actors.domain.inflight import PendingCall
    from oma_actors.tools.base import Tool, ToolContext

OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
STALE = "APPROVAL_STALE_DECISION"
VALIDATION = "APPROVAL_VALIDATION_ERROR"


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the tool; with ``input``, on that input (a reviewer's edit) instead of the model's."""

    input: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """Commit ``outcome`` without running the tool (``unknown``: an unsafe call's outcome)."""

    outcome: ToolOutcome
    unknown: bool = False


@dataclass(frozen=True, slots=True)
class Park:
    """Suspend the task on ``request`` (new, or still undecided after a restore)."""

    request: ApprovalRequest


CallPlan = Execute | Answer | Park


@dataclass(frozen=True, slots=True, kw_only=True)
class CallPolicy:
    """The gate and approval wiring of one runner.

    Attributes:
        gate: ``on_tool_call``, or ``None``.
        can_suspend: durable suspension is possible here (an orchestrated task whose checkpoint
            store has ``compare_and_set``); otherwise a ``Suspend`` fails closed: the call is
            answered with an error result and never runs (spec AP-26).
        clock: stamps the ``requested_at`` of the approval requests it creates.
        fencing_token: the run lease's token, handed to every tool in its ``ToolContext``.
        run_attempt: the run's attempt, handed to every tool as ``ToolContext.run_attempt``.
    """

    gate: Gate | None = None
    can_suspend: bool = False
    clock: Clock = SYSTEM_CLOCK
    fencing_token: int | None = None
    run_attempt: int = 1


def error_outcome(item: PendingCall, message: str) -> ToolOutcome:
    """An error result for ``item`` that the model sees; the tool did not run."""
    return outcome_of(item.call, ToolResult(message, is_error=True), 0)


async def plan_call(
    item: PendingCall, tools: Mapping[str, Tool], ctx: ToolContext, policy: CallPolicy
) -> CallPlan:
    """Decide ``item`` (uncommitted) before anything runs."""
    name = item.call.name
    tool = tools.get(name)
    if item.dispatched:
        return await reconcile(item, tool, ctx)
    if item.approval_decision is not None:
        # OMA re-hashes the current call before it looks at the decision (executor.ts 213-247):
        # a rejection decided for another call is as stale as an approval would be.
        verify_approved(item, tools, ctx)
        if item.approval_decision.decision == "rejected":
            return Answer(error_outcome(item, f'Tool "{name}" denied by durable approval.'))
        try:
            return Execute(edited_input(item, tools))
        except DurableApprovalError as exc:
            # The decision is final and its edit does not fit: the call fails (the model sees
            # why), never runs on the model's input, and the run goes on instead of refusing
            # every restore of it.
            return Answer(error_outcome(item, str(exc)))
    if item.approval_request is not None:
        return Park(item.approval_request)
    if tool is None or (policy.gate is None and tool.effect != "unsafe"):
        # The executor answers an unknown tool, and validates the input once, itself.
        return Execute()
    try:
        parsed = parse_tool_input(tool.input_model, name, item.call.input)
    except ToolInputError as exc:
        # Answered before anything is dispatched: a call that cannot run gets no dispatch
        # record (an unsafe tool's), so a crash now cannot leave it "outcome unknown".
        return Answer(error_outcome(item, f"Error: {exc}"))
    if policy.gate is None:
        return Execute()
    validated = parsed.model_dump(mode="json")
    request = ToolCallRequest(
        run_id=ctx.run_id,
        task_id=ctx.task_id,
        agent_name=ctx.agent_name,
        tool_call_id=item.call.id,
        tool_name=name,
        input=validated,
        raw_input=dict(item.call.input),
        consequential=tool.consequential,
    )
    verdict = await consult(policy.gate, request)
    match verdict:
        case Allow():
            return Execute()
        case Deny(reason=reason):
            suffix = f": {reason}" if reason else ""
            return Answer(error_outcome(item, f'Tool "{name}" denied by onToolCall{suffix}'))
        case GateFailed(error=error):
            message = f'Tool "{name}" onToolCall hook threw an error: {error}'
            return Answer(error_outcome(item, message))
        case Suspend(reason=reason):
            if not policy.can_suspend or ctx.run_id is None or ctx.task_id is None:
                return Answer(
                    error_outcome(
                        item,
                        f'Tool "{name}" requested suspension, but durable tool approval requires '
                        "an orchestrated task with checkpoint persistence and "
                        "MemoryStore.compare_and_set.",
                    )
                )
            content = tool_call_content(
                tool_name=name,
                raw_input=dict(item.call.input),
                input=validated,
                agent_name=ctx.agent_name,
                task_id=ctx.task_id,
                tool_call_id=item.call.id,
                consequential=tool.consequential,
            )
            return Park(
                create_approval_request(
                    run_id=ctx.run_id,
                    scope="tool_call",
                    boundary=tool_call_boundary(ctx.task_id, item.call.id),
                    content=content,
                    reason=reason,
                    clock=policy.clock,
                )
            )
        case _:
            assert_never(verdict)


def verify_approved(item: PendingCall, tools: Mapping[str, Tool], ctx: ToolContext) -> None:
    """Re-check an approved call against the CURRENT tool before it runs once (spec AP-34).

    Raises:
        DurableApprovalError: ``APPROVAL_STALE_DECISION`` when the tool is gone, its schema no
            longer accepts the reviewed input, or the content differs from what was reviewed.
    """
    request = item.approval_request
    if request is None:
        raise DurableApprovalError("APPROVAL_INTEGRITY_ERROR", "a decision without its request")
    tool = tools.get(item.call.name)
    if tool is None:
        raise DurableApprovalError(STALE, "The reviewed tool is no longer granted.")
    try:
        parsed = parse_tool_input(tool.input_model, tool.name, item.call.input)
    except ToolInputError as exc:
        raise DurableApprovalError(
            STALE, f"The current tool schema no longer accepts the reviewed input. ({exc})"
        ) from None
    # The flag comes from the CURRENT tool, as OMA recomputes it: an approval recorded for a
    # consequential tool binds that flag, so a tool whose flag changed since review is stale.
    content = tool_call_content(
        tool_name=tool.name,
        raw_input=dict(item.call.input),
        input=parsed.model_dump(mode="json"),
        agent_name=ctx.agent_name,
        task_id=ctx.task_id or "",
        tool_call_id=item.call.id,
        consequential=tool.consequential,
    )
    if hash_approval_request("tool_call", request.boundary, content) != request.request_hash:
        raise DurableApprovalError(
            STALE, f"tool call {item.call.id!r} differs from the reviewed content"
        )


def edited_input(item: PendingCall, tools: Mapping[str, Tool]) -> dict[str, Any] | None:
    """The reviewer's edited input of an approved call, checked by the tool's schema (D17).

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` when the current tool's schema
            refuses the edit: the call fails rather than run on the model's input.
    """
    decision = item.approval_decision
    edit = None if decision is None else decision.edited_input
    tool = tools.get(item.call.name)
    if edit is None or tool is None:  # no tool: verify_approved refused it already
        return edit
    try:
        parse_tool_input(tool.input_model, tool.name, edit)
    except ToolInputError as exc:
        raise DurableApprovalError(
            VALIDATION,
            f"the edited input approved for tool call {item.call.id!r} does not fit tool "
            f"{tool.name!r}: {exc}",
        ) from None
    return edit


async def reconcile(item: PendingCall, tool: Tool | None, ctx: ToolContext) -> Answer:
    """Decide a dispatched, uncommitted unsafe call after a restore, without re-running it.

    The tool's ``reconcile`` may report what happened; otherwise the model is told the outcome
    is unknown (decision D1).
    """
    if tool is not None and tool.reconcile is not None:
        decided = await settle(tool.reconcile(ctx))
        if decided is not None:
            return Answer(outcome_of(item.call, decided, 0))
    message = (
        f"{OUTCOME_UNKNOWN}: tool {item.call.name!r} was started before an interruption and "
        "its outcome is unknown; it was not run again. Check its effect before retrying."
    )
    return Answer(error_outcome(item, message), unknown=True)

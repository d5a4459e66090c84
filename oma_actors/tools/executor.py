"""Run one model-issued tool call and turn every outcome into a tool result the model can see."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from oma_actors.domain.inflight import ToolCommit
from oma_actors.domain.messages import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.domain.results import ToolCallRecord
from oma_actors.errors import ToolInputError
from oma_actors.tools.base import Tool, ToolContext, ToolResult, settle
from oma_actors.tools.validation import parse_tool_input

if TYPE_CHECKING:
    from collections.abc import Mapping

logger = logging.getLogger(__name__)


ToolOutcome = ToolCommit


def outcome_of(call: ToolUseBlock, result: ToolResult, duration_ms: int) -> ToolOutcome:
    """Build the result block and record for ``call`` from a tool's ``result``."""
    content = list(result.content) if result.content is not None else result.data
    return ToolOutcome(
        block=ToolResultBlock(call.id, content, is_error=result.is_error),
        record=ToolCallRecord(
            tool_name=call.name,
            input=dict(call.input),
            output=result.data,
            duration_ms=duration_ms,
            tool_call_id=call.id,
            is_error=result.is_error,
        ),
    )


async def execute_tool_call(
    call: ToolUseBlock, tools: Mapping[str, Tool], ctx: ToolContext
) -> ToolOutcome:
    """Execute ``call`` with the granted ``tools``.

    An unknown tool name, arguments that were not valid JSON (``parse_tool_input``: the tool
    does not run on its defaults), input that fails the tool's schema, or an exception raised by
    the tool become error results (the model sees them and can correct itself, spec RN-12); they
    are never raised. Cancellation propagates.
    """
    started = time.perf_counter()

    def elapsed() -> int:
        return int((time.perf_counter() - started) * 1000)

    tool = tools.get(call.name)
    if tool is None:
        granted = ", ".join(sorted(tools)) or "none"
        message = f'Error: tool "{call.name}" is not available to this agent (granted: {granted}).'
        return outcome_of(call, ToolResult(message, is_error=True), elapsed())
    try:
        parsed = parse_tool_input(tool.input_model, tool.name, call.input)
    except ToolInputError as exc:
        return outcome_of(call, ToolResult(f"Error: {exc}", is_error=True), elapsed())
    try:
        raw = await settle(tool.execute(parsed, ctx))
    except Exception as exc:  # a tool's failure is data for the model, not a crash of the run
        logger.info("tool %s raised %s", tool.name, type(exc).__name__, exc_info=True)
        result = ToolResult(f"Error: {type(exc).__name__}: {exc}", is_error=True)
        return outcome_of(call, result, elapsed())
    result = raw if isinstance(raw, ToolResult) else ToolResult(str(raw))
    foreign = _foreign_part(result)
    if foreign is not None:
        # Its effect may have happened; its content cannot be sent, journaled or checkpointed.
        message = (
            f"Error: tool {tool.name!r} returned content the model cannot be shown: part "
            f"{foreign[0]} is a {type(foreign[1]).__name__} (TextBlock or ImageBlock expected)"
        )
        result = ToolResult(message, is_error=True)
    return outcome_of(call, result, elapsed())


def _foreign_part(result: ToolResult) -> tuple[int, object] | None:
    """The first part of ``result.content`` that is no text or image block (D8), if any."""
    for index, part in enumerate(result.content or ()):
        if not isinstance(part, TextBlock | ImageBlock):
            return index, part
    return None

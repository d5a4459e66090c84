"""Tools: ``define_tool``, the call context, results and execution."""

from oma_actors.tools.base import (
    Tool,
    ToolContext,
    ToolEffect,
    ToolExecute,
    ToolReconcile,
    ToolResult,
    define_tool,
)
from oma_actors.tools.executor import ToolOutcome, execute_tool_call, outcome_of

__all__ = [
    "Tool",
    "ToolContext",
    "ToolEffect",
    "ToolExecute",
    "ToolOutcome",
    "ToolReconcile",
    "ToolResult",
    "define_tool",
    "execute_tool_call",
    "outcome_of",
]

"""Typed identifiers. ``NewType`` keeps ids apart for the type checker at no runtime cost."""

from __future__ import annotations

import uuid
from typing import NewType

RunId = NewType("RunId", str)
TaskId = NewType("TaskId", str)
ToolCallId = NewType("ToolCallId", str)
AgentName = NewType("AgentName", str)


def new_id() -> str:
    """Return a fresh random UUID4 string (the id format OMA uses for tasks and runs)."""
    return str(uuid.uuid4())

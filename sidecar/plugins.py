"""What a sidecar can offer besides host tools: Python tools by entry point, approval gates."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
from typing import TYPE_CHECKING, Any

from oma_actors import Tool
from oma_actors.approvals import Suspend

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sidecar._pb.oma.v1 import sidecar_pb2 as pb

logger = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "oma_actors.tools"
# A provider, the SDK module its adapter needs, and the environment variable of its API key.
PROVIDER_NEEDS = {
    "anthropic": ("anthropic", "ANTHROPIC_API_KEY"),
    "openai": ("openai", "OPENAI_API_KEY"),
}


def load_python_tools() -> dict[str, Tool]:
    """Tools registered under the entry point group ``oma_actors.tools``.

    An entry point may name a ``Tool``, or a callable returning a ``Tool`` or a list of them.
    One that fails to load is logged and skipped.
    """
    tools: dict[str, Tool] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded: Any = entry.load()
            if not isinstance(loaded, Tool) and callable(loaded):
                loaded = loaded()
            for tool in loaded if isinstance(loaded, list | tuple) else [loaded]:
                if not isinstance(tool, Tool):
                    raise TypeError(f"{type(tool).__name__} is not a Tool")
                tools[tool.name] = tool
        except Exception:
            logger.exception("could not load tool entry point %s", entry.name)
    return tools


def usable_providers(env: Mapping[str, str] | None = None) -> list[str]:
    """The providers an agent can use here: ``scripted``, and each one with its SDK and key.

    Args:
        env: the environment to look for API keys in (default ``os.environ``).
    """
    env = os.environ if env is None else env
    usable = [
        name
        for name, (module, key) in PROVIDER_NEEDS.items()
        if env.get(key, "").strip() and importlib.util.find_spec(module) is not None
    ]
    return [*usable, "scripted"]


def gates_of(gates: pb.ApprovalGates) -> dict[str, Any]:
    """``OpenMultiAgent`` gate arguments that suspend for a durable decision where asked."""
    chosen: dict[str, Any] = {}
    if gates.plan:
        chosen["on_plan_ready"] = lambda *args: Suspend()
    if gates.task_dispatch:
        chosen["on_task_dispatch"] = lambda *args: Suspend()
    if gates.tool_calls:
        names = frozenset(gates.tool_calls)
        chosen["on_tool_call"] = lambda call: (
            Suspend() if getattr(call, "tool_name", None) in names else True
        )
    return chosen

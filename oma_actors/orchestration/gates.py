"""Approval gate answers. A gate returns ``True``/``False`` or one of these values."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


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


GateAnswer = bool | Allow | Deny | Suspend
Gate = Callable[..., GateAnswer | Awaitable[GateAnswer]]

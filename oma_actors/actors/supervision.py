"""What happens to an actor when its ``receive`` (or a lifecycle hook) raises.

A ``Supervision`` is a frozen value handed to ``ActorSystem.spawn``. There are three policies:

* ``Supervision.stop()`` (the default): the actor stops. The ask whose message failed gets the
  exception; asks still queued get ``ActorStoppedError``; a failing tell is logged.
* ``Supervision.restart(max_restarts, within_seconds)``: a fresh instance from the spawn factory
  takes over the rest of the mailbox. More than ``max_restarts`` failures inside a sliding window
  of ``within_seconds`` stop the actor as ``stop()`` would.
* ``Supervision.escalate()``: the failure shuts the whole system down and the ``async with`` of
  the ``ActorSystem`` raises ``ActorFailedError`` whose ``__cause__`` is the original exception.

Only ``Exception`` subclasses count as failures: cancellation and other ``BaseException``s always
propagate untouched.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

from oma_actors.errors import ConfigurationError


class SupervisionKind(enum.Enum):
    """The three supervision policies."""

    STOP = "stop"
    RESTART = "restart"
    ESCALATE = "escalate"


@dataclass(frozen=True, slots=True, kw_only=True)
class Supervision:
    """A supervision policy; build one with ``stop()``, ``restart()`` or ``escalate()``.

    Attributes:
        kind: which policy this is.
        max_restarts: restarts allowed inside the window (``restart`` only).
        within_seconds: the length of the sliding window (``restart`` only).
    """

    kind: SupervisionKind
    max_restarts: int = 0
    within_seconds: float = 0.0

    @classmethod
    def stop(cls) -> Supervision:
        """A failure stops the actor."""
        return cls(kind=SupervisionKind.STOP)

    @classmethod
    def restart(cls, max_restarts: int = 3, within_seconds: float = 60.0) -> Supervision:
        """A failure replaces the actor with a fresh instance from its factory.

        Args:
            max_restarts: how many restarts are allowed inside any window of ``within_seconds``;
                the next failure stops the actor.
            within_seconds: the length of that window.

        Raises:
            ConfigurationError: if ``max_restarts`` is negative or ``within_seconds`` is not
                positive.
        """
        if max_restarts < 0:
            raise ConfigurationError(f"max_restarts must be >= 0, got {max_restarts}")
        if within_seconds <= 0:
            raise ConfigurationError(f"within_seconds must be > 0, got {within_seconds}")
        return cls(
            kind=SupervisionKind.RESTART,
            max_restarts=max_restarts,
            within_seconds=within_seconds,
        )

    @classmethod
    def escalate(cls) -> Supervision:
        """A failure shuts the whole system down; its ``async with`` raises ``ActorFailedError``."""
        return cls(kind=SupervisionKind.ESCALATE)


class RestartBudget:
    """Counts restarts in a sliding window to decide whether one more is allowed."""

    __slots__ = ("_policy", "_times")

    def __init__(self, policy: Supervision) -> None:
        self._policy = policy
        self._times: deque[float] = deque()

    def take(self, now: float) -> bool:
        """Record a restart at ``now`` and return True, or return False if the budget is spent."""
        horizon = now - self._policy.within_seconds
        while self._times and self._times[0] <= horizon:
            self._times.popleft()
        if len(self._times) >= self._policy.max_restarts:
            return False
        self._times.append(now)
        return True


DEFAULT_SUPERVISION = Supervision.stop()
"""The policy ``spawn`` uses when none is given (a name, so it can be a default argument)."""

__all__ = ["DEFAULT_SUPERVISION", "RestartBudget", "Supervision", "SupervisionKind"]

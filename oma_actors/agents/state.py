"""The runner's explicit state (the values live in ``oma_actors.domain.inflight``)."""

from oma_actors.domain.inflight import BoundaryKind, PendingCall, RunnerPhase, RunnerState

__all__ = ["BoundaryKind", "PendingCall", "RunnerPhase", "RunnerState"]

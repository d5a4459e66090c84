"""``RunStoreOptions``: how an orchestrator (or one call) is told to own its runs (RS-12).

A bare ``RunStore`` means the defaults; ``RunStoreOptions`` names the worker, widens the lease,
turns the heartbeat off or injects a clock; ``False`` on a call opts that call out of the
orchestrator's run store. ``resolve_run_store`` applies that precedence once, at the boundary.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Literal

from oma_actors.runs.ledger import DEFAULT_LEASE_TTL, RunLedger, check_owner, lease_ttl_ms

if TYPE_CHECKING:
    from collections.abc import Callable

    from oma_actors.runs.store import RunStore


@dataclass(frozen=True, slots=True)
class RunStoreOptions:
    """A run store and the terms of this worker's leases.

    Args:
        store: Where run records live.
        owner: This worker's identity (default: a fresh one per ledger).
        lease_ttl: Seconds a lease lasts without renewal.
        heartbeat: Renew in the background while a run is open.
        clock: Unix time in seconds, for tests (default ``time.time``).

    Raises:
        LeaseError: ``RUN_VALIDATION_ERROR`` for a blank owner or a TTL that is not positive.
    """

    store: RunStore
    _: KW_ONLY
    owner: str | None = None
    lease_ttl: float = DEFAULT_LEASE_TTL
    heartbeat: bool = True
    clock: Callable[[], float] | None = None

    def __post_init__(self) -> None:
        if self.owner is not None:
            check_owner(self.owner)
        lease_ttl_ms(self.lease_ttl)

    def ledger(self) -> RunLedger:
        """A ledger with these terms (one per worker: reuse it for every run it owns)."""
        return RunLedger(self.store, owner=self.owner, lease_ttl=self.lease_ttl, clock=self.clock)


def resolve_run_store(
    *layers: RunStore | RunStoreOptions | Literal[False] | None,
) -> RunStoreOptions | None:
    """The options in force: the first layer that says anything (e.g. per call, then config).

    ``None`` says nothing; ``False`` says "no run store"; a bare store means its defaults.
    """
    for layer in layers:
        if layer is None:
            continue
        if layer is False:
            return None
        if isinstance(layer, RunStoreOptions):
            return layer
        return RunStoreOptions(layer)
    return None

"""Failover: a live sidecar adopts the runs nobody holds the lease of.

Every sidecar runs its runs under a lease in its state store (``oma_actors.runs.RunStoreOptions``,
owner = the sidecar's owner id, one per process start: ``sidecar.owner``), renewed by heartbeat
while the run executes, on every store kind: a lone sidecar on a file store simply never meets
a rival. A sidecar that dies (or stalls, or loses its store for longer than the TTL) stops
renewing; once the lease has expired the run shows ``INTERRUPTED`` (``sidecar.authority``), and
each live sidecar's :class:`Failover` sweep (at start, then every quarter TTL) tries to adopt
it: a sibling, a restarted sidecar (a new owner), or the very sidecar whose lease lapsed (its
attempt stopped writing once the lease was lost). ``RunExecutor.adopt`` first acquires the
run's lease (fencing token + 1, attempt + 1): of two sidecars adopting at once, the run record
lets one through, whatever either read; the winner then claims the registry's record and its
attempt acquires the lease again as the same owner before any work. The loser does nothing.
No membership, no consensus: the store's compare-and-set is the only arbiter
(shared/DESIGN.md "Scale-out").

Cost: a sweep lists the registry's records and the run records (two ``AtomicStore.list`` by
prefix), then reads again only the runs it adopts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from oma_actors.runs import MemoryStoreRunStore, RunStoreOptions
from oma_actors.stores import parse_store_uri
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.sweeps import sweep_forever

if TYPE_CHECKING:
    from oma_actors.stores import AtomicStore
    from sidecar.execution import RunExecutor
    from sidecar.runs import RunRegistry

logger = logging.getLogger(__name__)

DEFAULT_LEASE_TTL = 10.0
SHARED_SCHEMES = frozenset({"postgresql"})
"""State stores whose compare-and-set is atomic across processes: several sidecars may share."""


def shared_store(store_uri: str) -> bool:
    """Whether ``store_uri`` is a store several sidecars share (their runs are then leased)."""
    return parse_store_uri(store_uri).kind in SHARED_SCHEMES


def lease_terms(
    store: AtomicStore, *, owner_id: str, lease_ttl: float, shared: bool
) -> RunStoreOptions:
    """The lease terms of a sidecar: its owner id and TTL, on its state store.

    ``shared``: the store's compare-and-set holds across processes (several sidecars may
    share it); otherwise it holds within this process, the only one using the store.
    """
    run_store = MemoryStoreRunStore(store, atomicity="cross-process" if shared else "process")
    return RunStoreOptions(run_store, owner=owner_id, lease_ttl=lease_ttl)


class Failover:
    """Sweeps the registry for runs nobody holds the lease of and adopts them.

    Args:
        executor: tells what shows interrupted, and runs what is adopted.
        registry: the run registry.
        lease_ttl: the lease TTL; the sweep runs every quarter of it, so a dead sidecar's
            runs are adopted within 1.25 TTL of its last renewal (P10).
    """

    def __init__(self, *, executor: RunExecutor, registry: RunRegistry, lease_ttl: float) -> None:
        self._executor = executor
        self._registry = registry
        self._interval = lease_ttl / 4

    async def run(self) -> None:
        """Sweep at once, then forever (a task of the server, cancelled at shutdown)."""
        await sweep_forever(self.sweep, interval=self._interval, what="failover", at_once=True)

    async def sweep(self) -> list[str]:
        """Adopt every run that shows interrupted (``sidecar.authority``); the ids."""
        adopted: list[str] = []
        views = await self._executor.viewed_all(await self._registry.query())
        for view in views:
            record = view.record
            if (
                view.status != pb.RUN_STATUS_INTERRUPTED
                or record.deleting
                or self._executor.running(record.run_id)
            ):
                continue
            try:
                claimed = await self._executor.adopt(record.run_id)
            except Exception:
                logger.exception("adopting run %s failed", record.run_id)
                continue
            if claimed is not None:
                adopted.append(record.run_id)
        return adopted

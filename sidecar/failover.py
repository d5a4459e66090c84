"""Failover: a live sidecar adopts the runs of a sibling whose leases expired.

Several sidecars sharing one PostgreSQL store each run their runs under a lease in the store
(``oma_actors.runs.RunStoreOptions``, owner = the sidecar's owner id), renewed by heartbeat while
the run executes. A sidecar that dies stops renewing; once a lease has expired, every live sidecar
sees the run ``running`` with a dead lease in :func:`oma_actors.runs.list_runs`, and each one's
:class:`Failover` sweep (every quarter TTL) tries to adopt it: ``RunExecutor.adopt`` claims the
sidecar's run record with a compare-and-set that requires the dead owner to still hold it, so
one sidecar wins, and the winner's attempt then acquires the lease (fencing token + 1, attempt
+ 1) before any work. The loser of either race does nothing. No membership, no consensus: the
store's compare-and-set is the only arbiter (shared/DESIGN.md "Scale-out").

Cost: a sweep reads the whole state table (``list_runs`` over ``AtomicStore.list``; the store
API has no prefix listing), i.e. every run's record, checkpoint and event pages, once per half
TTL per sidecar. Retention (``--retain-runs`` / ``--retain-seconds``) keeps that table bounded;
reading only ``__oma_run__/`` keys needs a prefix ``list`` in the store API (oma_actors).
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING

from oma_actors.runs import MemoryStoreRunStore, RunStoreOptions, list_runs
from oma_actors.stores import parse_store_uri

if TYPE_CHECKING:
    from collections.abc import Callable

    from oma_actors.stores import AtomicStore
    from sidecar.execution import RunExecutor

logger = logging.getLogger(__name__)

DEFAULT_LEASE_TTL = 10.0
SHARED_SCHEMES = frozenset({"postgresql"})
"""State stores whose compare-and-set is atomic across processes: several sidecars may share."""


def shared_store(store_uri: str) -> bool:
    """Whether ``store_uri`` is a store several sidecars share (their runs are then leased)."""
    return parse_store_uri(store_uri).kind in SHARED_SCHEMES


def lease_terms(store: AtomicStore, *, owner_id: str, lease_ttl: float) -> RunStoreOptions:
    """The lease terms of a sidecar on a shared store: its owner id and TTL."""
    run_store = MemoryStoreRunStore(store, atomicity="cross-process")
    return RunStoreOptions(run_store, owner=owner_id, lease_ttl=lease_ttl)


class Failover:
    """Sweeps the shared store for runs whose lease expired and adopts them.

    Args:
        executor: runs what is adopted.
        store: the shared state store (run records and leases).
        owner_id: this sidecar's owner id (its own runs are never adopted).
        lease_ttl: the lease TTL; the sweep runs every quarter of it, so a dead sidecar's
            runs are adopted within 1.25 TTL of its last renewal (P10).
        clock: Unix time in seconds (tests).
    """

    def __init__(
        self,
        *,
        executor: RunExecutor,
        store: AtomicStore,
        owner_id: str,
        lease_ttl: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._executor = executor
        self._store = store
        self._owner_id = owner_id
        self._interval = lease_ttl / 4
        self._clock = clock

    async def run(self) -> None:
        """Sweep forever (a task of the server, cancelled at shutdown)."""
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.sweep()
            except Exception:  # a store hiccup: the next sweep tries again
                logger.exception("failover sweep failed")

    async def sweep(self) -> list[str]:
        """Adopt every run of another owner whose lease expired; the ids adopted."""
        adopted: list[str] = []
        now = self._clock()
        for summary in await list_runs(self._store):
            owner, expires = summary.owner, summary.lease_expires_at
            if summary.status != "running" or owner is None or expires is None:
                continue
            if owner == self._owner_id or datetime.fromisoformat(expires).timestamp() > now:
                continue
            try:
                record = await self._executor.adopt(summary.run_id, owner)
            except Exception:
                logger.exception("adopting run %s failed", summary.run_id)
                continue
            if record is not None:
                adopted.append(summary.run_id)
        return adopted

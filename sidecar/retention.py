"""Deleting runs: ``DeleteRun`` and the retention policy of finished runs.

A run is deleted whole: first its registry record is marked ``deleting`` in a compare-and-set
that also requires no restore, cancel or adoption to have claimed it since it was read (they
require the same of theirs, so of a ``DeleteRun`` and a ``RestoreRun`` exactly one wins:
``RunExecutor.claim_deletion``). Then, in its checkpoint store, its checkpoint, history anchors
and approval rows; its journal file (``sidecar.journals``), once the checkpoint it extends is
gone; its run record (the lease, in the state store); its event log and last its registry
record (so a deletion cut short, by a journal file that cannot be removed too, is finished by
the next one: the run is still listed). A run some sidecar executes (queued or running) is never
deleted; one that just finished here is deleted at once. Listing a run's approvals reads the
whole checkpoint store (``DurableApprovalLedger.list``): bounded because retention bounds it.

``oma serve --retain-runs N`` / ``--retain-seconds S`` keep a long-lived sidecar bounded: every
``interval`` seconds :class:`Retention` deletes the finished runs beyond the newest ``N`` and
those that finished more than ``S`` seconds ago, and forgets what this process cached of runs a
sibling deleted. Suspended runs wait for a decision and are kept. On a shared store every
sidecar sweeps; deleting a run already deleted is a no-op.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from oma_actors.approvals import DurableApprovalLedger
from oma_actors.checkpoint import history_keys
from oma_actors.keyspace import approval_key, checkpoint_key, run_record_key
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.journals import JournalFileError
from sidecar.record import FINISHED, TERMINAL, UnknownRunError
from sidecar.run_history import delete_key
from sidecar.status import SidecarError
from sidecar.sweeps import sweep_forever

if TYPE_CHECKING:
    from collections.abc import Callable

    from sidecar.execution import RunExecutor
    from sidecar.journals import RunJournals
    from sidecar.record import WireStatus
    from sidecar.runs import RunRegistry
    from sidecar.stores import StoreRegistry

logger = logging.getLogger(__name__)

RETAINED: frozenset[WireStatus] = TERMINAL | {pb.RUN_STATUS_FAILED}
"""Statuses the retention policy deletes: ended ones (a suspended run waits for a reviewer, an
interrupted one for a sidecar to adopt it)."""
DEFAULT_INTERVAL = 10.0
PARALLEL_DELETES = 32
"""Runs a sweep deletes at a time."""


class RunDeleter:
    """Deletes one run everywhere it is stored.

    Args:
        registry: the run registry.
        executor: tells whether this process executes the run.
        stores: opens the run's checkpoint store.
        journals: where runs keep their journals (``None``: the executor's).
    """

    def __init__(
        self,
        *,
        registry: RunRegistry,
        executor: RunExecutor,
        stores: StoreRegistry,
        journals: RunJournals | None = None,
    ) -> None:
        self._registry = registry
        self._executor = executor
        self._stores = stores
        self._journals = journals or executor.journals

    async def delete(self, run_id: str) -> int:
        """Delete ``run_id``; how many stored keys it removed.

        Raises:
            InvalidArgument: ``run_id`` is malformed.
            UnknownRunError: there is no such run.
            FailedPrecondition: ``RUN_ACTIVE``, a sidecar executes the run.
            JournalFileError: the run's journal file could not be removed (the run is still
                listed; its checkpoint is gone).
        """
        convert.check_run_id(run_id)
        record = await self._executor.claim_deletion(run_id)
        # Held open for the whole deletion; given back after it, so a store only deleted runs
        # named is closed once more than ``MAX_IDLE_STORES`` stores are idle (``StoreRegistry``).
        async with self._stores.lease(record.store_uri) as store:
            keys = [record.request.checkpoint.key or checkpoint_key(run_id)]
            # A journal-first run's history anchors (D17): its compaction snapshots, kept apart.
            keys.extend(await history_keys(store, run_id))
            rows = await DurableApprovalLedger(store).list(run_id=run_id)
            keys.extend(approval_key(row.request.id) for row in rows)
            # At once: a file store writes concurrent deletions in one rewrite (group commit).
            deleted = sum(await asyncio.gather(*(delete_key(store, key) for key in keys)))
        # After the checkpoint (a journal tail without it restores nothing), before the record.
        await self._journals.remove(run_id, record.store_uri)
        deleted += await delete_key(self._registry.store, run_record_key(run_id))
        return deleted + await self._registry.delete(record)


class Retention:
    """Deletes finished runs beyond a count or an age, periodically.

    Args:
        registry: the run registry.
        executor: what each run is (only finished runs are deleted).
        deleter: deletes one run.
        keep_runs: keep the newest this many finished runs (``None``: no count limit).
        keep_seconds: keep finished runs this long after their last change (``None``: no age).
        interval: seconds between sweeps.
        clock: Unix time in seconds (tests).
    """

    def __init__(
        self,
        *,
        registry: RunRegistry,
        executor: RunExecutor,
        deleter: RunDeleter,
        keep_runs: int | None = None,
        keep_seconds: float | None = None,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._executor = executor
        self._deleter = deleter
        self._keep_runs = keep_runs
        self._keep_seconds = keep_seconds
        self._interval = interval
        self._clock = clock

    async def run(self) -> None:
        """Sweep forever (a task of the server, cancelled at shutdown)."""
        await sweep_forever(self.sweep, interval=self._interval, what="retention", at_once=False)

    async def sweep(self) -> list[str]:
        """Delete the finished runs the policy no longer keeps; the ids deleted."""
        records = await self._registry.query()
        stored = {record.run_id for record in records}
        for run_id, status in self._registry.cached().items():
            if run_id not in stored and status in FINISHED:
                self._registry.forget(run_id)  # a sibling deleted it
        views = await self._executor.viewed_all(records)
        finished = [view for view in views if view.status in RETAINED]
        finished.sort(key=lambda view: view.updated_at, reverse=True)
        now = self._clock()
        doomed = [
            view.run_id
            for index, view in enumerate(finished)
            if (self._keep_runs is not None and index >= self._keep_runs)
            or (
                self._keep_seconds is not None
                and now - view.updated_at.timestamp() > self._keep_seconds
            )
        ]
        # Several at a time: a file store folds concurrent writes into one rewrite of the
        # file, so deleting keeps up with runs finishing (P11 on the default store kind).
        gate = asyncio.Semaphore(PARALLEL_DELETES)

        async def delete(run_id: str) -> str | None:
            async with gate:
                try:
                    await self._deleter.delete(run_id)
                except JournalFileError as exc:  # kept listed: the next sweep tries again
                    logger.warning("retention: run %s: %s", run_id, exc)
                    return None
                except (UnknownRunError, SidecarError):  # deleted meanwhile, or restored
                    return None
                return run_id

        done = await asyncio.gather(*(delete(run_id) for run_id in doomed))
        return [run_id for run_id in done if run_id is not None]

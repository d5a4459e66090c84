"""Deleting runs: ``DeleteRun`` and the retention policy of finished runs.

A run is deleted whole: in its checkpoint store its checkpoint, its run record (the lease) and
its approval rows; then its journal file (``sidecar.journals``), once the checkpoint it extends
is gone; in the state store its event log and last its registry record (so a deletion cut short,
by a journal file that cannot be removed too, is finished by the next one: the run is still
listed). A run some sidecar executes
(queued or running) is never deleted. The store has no conditional delete, so a ``RestoreRun``
on another sidecar in the instant between the check and the deletion is not excluded; its
attempt then finds no record and stops. Listing a run's approvals reads the whole checkpoint
store (``DurableApprovalLedger.list``): bounded because retention bounds the store.

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

from oma_actors.keyspace import approval_key, checkpoint_key, history_prefix, run_record_key
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.approvals import ledger_module
from sidecar.journals import JournalFileError
from sidecar.record import ACTIVE, FINISHED, UnknownRunError
from sidecar.run_history import delete_key
from sidecar.status import FailedPrecondition, SidecarError

if TYPE_CHECKING:
    from collections.abc import Callable

    from sidecar.execution import RunExecutor
    from sidecar.journals import RunJournals
    from sidecar.record import RunStatus
    from sidecar.runs import RunRegistry
    from sidecar.stores import StoreRegistry

logger = logging.getLogger(__name__)

RETAINED: frozenset[RunStatus] = FINISHED - {pb.RUN_STATUS_SUSPENDED}
"""Statuses the retention policy deletes (a suspended run waits for a reviewer)."""
DEFAULT_INTERVAL = 10.0


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
        record = await self._registry.get(run_id)
        if self._executor.running(run_id) or record.status in ACTIVE:
            raise FailedPrecondition(
                "RUN_ACTIVE",
                f"run {run_id!r} is {pb.RunStatus.Name(record.status)}: cancel it first",
            )
        store = await self._stores.get(record.store_uri)
        keys = [record.request.checkpoint.key or checkpoint_key(run_id), run_record_key(run_id)]
        # A journal-first run's history anchors (D17): its compaction snapshots, kept apart.
        anchors = history_prefix(run_id)
        keys.extend(entry.key for entry in await store.list() if entry.key.startswith(anchors))
        module = ledger_module()
        if module is not None:
            rows = await module.DurableApprovalLedger(store).list(run_id=run_id)
            keys.extend(approval_key(row.request.id) for row in rows)
        deleted = 0
        for key in keys:
            deleted += await delete_key(store, key)
        # After the checkpoint (a journal tail without it restores nothing), before the record.
        await self._journals.remove(run_id, record.store_uri)
        return deleted + await self._registry.delete(run_id)


class Retention:
    """Deletes finished runs beyond a count or an age, periodically.

    Args:
        registry: the run registry.
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
        deleter: RunDeleter,
        keep_runs: int | None = None,
        keep_seconds: float | None = None,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._deleter = deleter
        self._keep_runs = keep_runs
        self._keep_seconds = keep_seconds
        self._interval = interval
        self._clock = clock

    async def run(self) -> None:
        """Sweep forever (a task of the server, cancelled at shutdown)."""
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.sweep()
            except Exception:  # a store hiccup: the next sweep tries again
                logger.exception("retention sweep failed")

    async def sweep(self) -> list[str]:
        """Delete the finished runs the policy no longer keeps; the ids deleted."""
        records = await self._registry.query()
        stored = {record.run_id for record in records}
        for run_id, status in self._registry.cached().items():
            if run_id not in stored and status in FINISHED:
                self._registry.forget(run_id)  # a sibling deleted it
        finished = [record for record in records if record.status in RETAINED]
        finished.sort(key=lambda record: record.updated_at, reverse=True)
        now = self._clock()
        deleted: list[str] = []
        for index, record in enumerate(finished):
            too_many = self._keep_runs is not None and index >= self._keep_runs
            age = now - record.updated_at.timestamp()
            too_old = self._keep_seconds is not None and age > self._keep_seconds
            if not (too_many or too_old):
                continue
            try:
                await self._deleter.delete(record.run_id)
            except JournalFileError as exc:  # kept listed: the next sweep tries again
                logger.warning("retention: run %s: %s", record.run_id, exc)
                continue
            except (UnknownRunError, SidecarError):  # deleted meanwhile, or restored
                continue
            deleted.append(record.run_id)
        return deleted

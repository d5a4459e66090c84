"""Where the run registry keeps its runs' events in the store.

A single sidecar saves a finished run's history whole, under ``__oma_sidecar__/events/<run_id>``
(one write per run, at its end). With ``durable_events`` (a store several sidecars share), every
event goes to the store as it happens, batched into pages (``sidecar.event_pages``): a watcher on
another sidecar follows the live run with no gap, and a sidecar that adopts the run continues
its log. Both forms are read, so a history saved either way loads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from oma_actors.keyspace import sidecar_key
from sidecar.event_pages import EVENTS_KIND, EventPages, delete_key, delete_pages
from sidecar.record_codec import decode_history, encode_history

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from oma_actors import AtomicStore
    from sidecar._pb.oma.v1 import sidecar_pb2 as pb
    from sidecar.run_log import KnownRun

logger = logging.getLogger(__name__)

SETTLE_GRACE_S = 1.0


def history_key(run_id: str) -> str:
    """The key of a run's whole saved history (the single-sidecar form)."""
    return sidecar_key(EVENTS_KIND, run_id)


class RunHistory:
    """Reads and writes runs' event histories.

    Args:
        store: the state store.
        durable_events: write each event as it happens (paged), not only at the end.
        spawn: schedules a background flush.
    """

    def __init__(
        self,
        store: AtomicStore,
        *,
        durable_events: bool,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
    ) -> None:
        self._store = store
        self.durable_events = durable_events
        self._spawn = spawn
        self._flushing: set[str] = set()

    def pages(self, run_id: str) -> EventPages:
        """A fresh reader and writer of ``run_id``'s pages."""
        return EventPages(self._store, run_id)

    async def stored_events(self, known: KnownRun) -> list[pb.RunEvent]:
        """The run's saved history and the pages written since ``known`` last read them."""
        run_id = known.log.run_id
        history = await self._store.get(history_key(run_id))
        events = decode_history(history.value) if history is not None else []
        if known.pages is not None:
            paged = await known.pages.read_new()
            if paged:
                known.pages.seen(max(event.seq for event in paged))
                events = sorted([*events, *paged], key=lambda event: event.seq)
        return events

    async def told_elsewhere(self, known: KnownRun) -> bool:
        """Whether the run's logged events announce its stored finished status after all.

        A sidecar writes a run's status first and its event right after: another sidecar that
        reads the record in between must not announce the status itself (a second event,
        seqs from a new block). With ``durable_events`` it waits :data:`SETTLE_GRACE_S` and
        reads the pages again; only a status still untold is announced (its owner died).
        """
        if not self.durable_events:
            return False
        await asyncio.sleep(SETTLE_GRACE_S)
        known.log.merge_history(await self.stored_events(known))
        return known.log.last_status == known.record.status

    async def save(self, known: KnownRun) -> None:
        """Make every event of the run so far durable (a finished run's history)."""
        if self.durable_events:
            await self._flush(known)
        else:
            await self._store.set(history_key(known.log.run_id), encode_history(known.log.events))

    def emitted(self, known: KnownRun) -> None:
        """An event was appended: with ``durable_events``, flush it soon.

        Events emitted while a flush writes go with the next one: batches form by themselves,
        one page write each.
        """
        run_id = known.log.run_id
        if self.durable_events and run_id not in self._flushing:
            self._flushing.add(run_id)
            self._spawn(self._flush_later(known))

    async def _flush(self, known: KnownRun) -> None:
        if known.pages is None:
            known.pages = self.pages(known.log.run_id)
        pages, log = known.pages, known.log
        while log.last_seq > pages.flushed_seq:
            if not await pages.append(log.since(pages.flushed_seq)):
                return

    async def _flush_later(self, known: KnownRun) -> None:
        try:
            await self._flush(known)
        finally:
            self._flushing.discard(known.log.run_id)

    async def delete(self, run_id: str) -> int:
        """Delete the run's history in both forms; how many keys there were."""
        return await delete_key(self._store, history_key(run_id)) + await delete_pages(
            self._store, run_id
        )

"""Where the run registry keeps its runs' progress events in the store: one key per run.

A run's progress log (``sidecar.run_log``) is saved whole under
``__oma_sidecar__/events/<run_id>`` when the run finishes and at a graceful stop (one write each),
so a sidecar that loads the run later, a restarted one or a sibling sharing the store, shows its
history and continues its seqs. The progress log is not the run's durable event log: that is the
run's journal (``WatchRun``'s default stream, ``sidecar.journal_watch``), written as events
happen on every store, followed live on any sidecar and kept across kills. No event is written
here per event.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from oma_actors.keyspace import sidecar_key
from sidecar.record_codec import decode_history, encode_history

if TYPE_CHECKING:
    from oma_actors.stores import AtomicStore, MemoryStore
    from sidecar._pb.oma.v1 import sidecar_pb2 as pb
    from sidecar.record import WireStatus
    from sidecar.run_log import KnownRun

EVENTS_KIND = "events"
SETTLE_GRACE_S = 1.0


def history_key(run_id: str) -> str:
    """The key of a run's saved progress history."""
    return sidecar_key(EVENTS_KIND, run_id)


async def delete_key(store: MemoryStore, key: str) -> int:
    """Delete ``key``; 1 if it was there, else 0."""
    if await store.get(key) is None:
        return 0
    await store.delete(key)
    return 1


class RunHistory:
    """Reads and writes runs' saved progress histories.

    Args:
        store: the state store.
        shared: several sidecars share the store (a finished status another one wrote is
            announced by it, see :meth:`told_elsewhere`).
    """

    def __init__(self, store: AtomicStore, *, shared: bool) -> None:
        self._store = store
        self.shared = shared

    async def stored_events(self, known: KnownRun) -> list[pb.RunEvent]:
        """The run's saved history (empty when none was saved)."""
        history = await self._store.get(history_key(known.log.run_id))
        return decode_history(history.value) if history is not None else []

    async def told_elsewhere(self, known: KnownRun, status: WireStatus) -> bool:
        """Whether the run's saved history announces its end ``status`` after all.

        A run's run record ends it first and its sidecar saves its history right after: another
        sidecar that reads the run in between must not announce the end itself (a second
        event, seqs from a new block, and its own history saved over the finisher's). On a
        shared store it waits :data:`SETTLE_GRACE_S` and reads the history again; only a status
        still untold is announced (its owner died).
        """
        if not self.shared:
            return False
        await asyncio.sleep(SETTLE_GRACE_S)
        known.log.merge_history(await self.stored_events(known))
        return bool(known.log.last_status == status)

    async def save(self, known: KnownRun) -> None:
        """Save every event of the run's log so far (a finished run's, or at a stop)."""
        await self._store.set(history_key(known.log.run_id), encode_history(known.log.events))

    async def delete(self, run_id: str) -> int:
        """Delete the run's saved history; how many keys there were (0 or 1)."""
        return await delete_key(self._store, history_key(run_id))

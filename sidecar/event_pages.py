"""A run's durable event log in pages, written as events happen (a store several sidecars share).

Events are kept under ``__oma_sidecar__/events/<run_id>/<page>``, pages numbered from 0, each a
JSON list of at most :data:`PAGE_SIZE` events (``record_codec.encode_history``). Only the last
page grows: a writer appends a batch to it with the store's ``compare_and_set``, and starts the
next page (``compare_and_set`` from nothing) when it is full, so pages are contiguous and two
sidecars writing the same run never lose each other's events. Seqs never collide: each writer
hands out seqs from its own reserved block (``sidecar.run_log``).

A flush costs one read and one write of at most one page (two at a page boundary), whatever the
run's length: the history is never rewritten. A reader keeps its place (the page it read last)
and re-reads from there, so following a run costs one or two reads per poll.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from oma_actors.keyspace import sidecar_key
from sidecar.record_codec import decode_history, encode_history

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors import AtomicStore, MemoryStore
    from sidecar._pb.oma.v1 import sidecar_pb2 as pb

EVENTS_KIND = "events"
PAGE_SIZE = 64
MAX_CAS_ATTEMPTS = 32


def page_key(run_id: str, page: int) -> str:
    """The store key of page ``page`` of ``run_id``'s event log."""
    return sidecar_key(EVENTS_KIND, f"{run_id}/{page}")


class PageConflictError(RuntimeError):
    """Other writers changed the last page ``MAX_CAS_ATTEMPTS`` times in a row."""


class EventPages:
    """One run's paged event log, as one sidecar reads and appends it.

    Args:
        store: the state store.
        run_id: the run.
    """

    def __init__(self, store: AtomicStore, run_id: str) -> None:
        self._store = store
        self.run_id = run_id
        self.page = 0  # the last page seen: the one a reader re-reads and a writer appends to
        self.flushed_seq = 0  # every event of ours up to this seq is in the store
        self._lock = asyncio.Lock()

    async def read_new(self) -> list[pb.RunEvent]:
        """The events of the page last seen and of every page after it, in page order."""
        events: list[pb.RunEvent] = []
        while True:
            entry = await self._store.get(page_key(self.run_id, self.page))
            if entry is None:
                return events
            page = decode_history(entry.value)
            events.extend(page)
            if len(page) < PAGE_SIZE:
                return events
            self.page += 1

    def seen(self, seq: int) -> None:
        """Events up to ``seq`` came from the store: never write them again."""
        self.flushed_seq = max(self.flushed_seq, seq)

    async def append(self, events: Sequence[pb.RunEvent]) -> int:
        """Write the events of ``events`` above :attr:`flushed_seq` (in seq order).

        Returns:
            How many events were written.

        Raises:
            PageConflictError: other writers won the last page too often in a row.
        """
        async with self._lock:
            pending = [event for event in events if event.seq > self.flushed_seq]
            written, conflicts = 0, 0
            while pending:
                key = page_key(self.run_id, self.page)
                entry = await self._store.get(key)
                current = decode_history(entry.value) if entry is not None else []
                if entry is not None and (len(current) >= PAGE_SIZE or not current):
                    self.page += 1  # full (or unreadable: never overwrite what we cannot read)
                    continue
                batch = pending[: PAGE_SIZE - len(current)]
                text = encode_history([*current, *batch])
                expected = entry.value if entry is not None else None
                if not await self._store.compare_and_set(key, expected, text):
                    conflicts += 1
                    if conflicts >= MAX_CAS_ATTEMPTS:
                        raise PageConflictError(self.run_id)
                    continue
                self.flushed_seq = max(self.flushed_seq, batch[-1].seq)
                written += len(batch)
                pending = pending[len(batch) :]
                if len(current) + len(batch) >= PAGE_SIZE:
                    self.page += 1
            return written


async def delete_key(store: MemoryStore, key: str) -> int:
    """Delete ``key``; 1 if it was there, else 0."""
    if await store.get(key) is None:
        return 0
    await store.delete(key)
    return 1


async def delete_pages(store: AtomicStore, run_id: str) -> int:
    """Delete ``run_id``'s event pages (they are contiguous from 0); how many there were."""
    page = 0
    while await delete_key(store, page_key(run_id, page)):
        page += 1
    return page

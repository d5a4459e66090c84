"""``RunJournal``, a run journal's append-only seam (JR-01), and ``InMemoryRunJournal`` (JR-03).

A journal is deliberately not a ``MemoryStore``: a key/value store rewrites a value per write,
so an event per model call would cost O(store size); a journal appends.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from oma_actors.errors import ConfigurationError
from oma_actors.journal.errors import JournalClosedError

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from oma_actors.journal.event import JournalEvent
    from oma_actors.journal.marks import DispatchMark


@runtime_checkable
class RunJournal(Protocol):
    """An append-only log of runs' events: append in seq order, read from a seq on, close."""

    async def append(self, events: Sequence[JournalEvent]) -> None:
        """Append events in order; returns once they are as durable as the backend makes them."""
        ...

    async def read_from(self, seq: int) -> list[JournalEvent]:
        """Every stored event with ``seq >= seq``, in order."""
        ...

    async def close(self) -> None:
        """Flush what is pending and release the backend; later appends raise."""
        ...

    def describe(self) -> dict[str, Any]:
        """``{"kind": ..., "path"?: ...}``, recorded in a v5 snapshot as ``journalRef``."""
        ...


@runtime_checkable
class RunReader(Protocol):
    """A journal that reads one run's events itself (an indexed query on a database)."""

    async def read_run(self, run_id: str, seq: int = 0) -> list[JournalEvent]:
        """The events of ``run_id`` with ``seq >= seq``, in order."""
        ...


async def read_run(journal: RunJournal, run_id: str, seq: int = 0) -> list[JournalEvent]:
    """The events of ``run_id`` with ``seq >= seq`` in ``journal``, by its own ``read_run``
    when it has one (a journal may hold several runs), else by filtering ``read_from``.

    Raises:
        Exception: the journal's own read error (e.g. ``JournalCorruptError``).
    """
    if isinstance(journal, RunReader):
        return await journal.read_run(run_id, seq)
    return [event for event in await journal.read_from(seq) if event.run_id == run_id]


@runtime_checkable
class RangeReader(Protocol):
    """A journal that reads a run's events between two seqs, of some types, without parsing
    the others."""

    async def read_range(
        self,
        run_id: str,
        first: int,
        last: int | None = None,
        *,
        types: Collection[str] | None = None,
    ) -> list[JournalEvent]:
        """The events of ``run_id`` with ``first <= seq <= last`` of ``types``, in order."""
        ...


async def read_run_range(
    journal: RunJournal,
    run_id: str,
    first: int,
    last: int | None = None,
    *,
    types: Collection[str] | None = None,
) -> list[JournalEvent]:
    """``read_run(journal, run_id, first)`` without the events above ``last`` (``None``: no
    bound) or of a type not in ``types`` (``None``: any), by the journal's own ``read_range``
    when it has one.

    Raises:
        Exception: the journal's own read error (e.g. ``JournalCorruptError``).
    """
    if isinstance(journal, RangeReader):
        return await journal.read_range(run_id, first, last, types=types)
    return [
        event
        for event in await read_run(journal, run_id, first)
        if (last is None or event.seq <= last) and (types is None or event.type in types)
    ]


class InMemoryRunJournal:
    """A bounded ring buffer of events for auditing a run inside one process (JR-03).

    Eviction drops the oldest events, so ``read_from`` returns the retained tail.
    """

    def __init__(self, *, max_events: int = 10_000) -> None:
        """Create an empty journal holding at most ``max_events`` events.

        Raises:
            ConfigurationError: ``max_events`` is not a positive integer.
        """
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
            raise ConfigurationError(f"max_events must be a positive integer, got {max_events!r}")
        self._events: deque[JournalEvent] = deque(maxlen=max_events)
        self._marks: deque[DispatchMark] = deque(maxlen=max_events)
        self._closed = False

    @property
    def size(self) -> int:
        """How many events are retained."""
        return len(self._events)

    async def append(self, events: Sequence[JournalEvent]) -> None:
        """Append events, evicting the oldest past the bound.

        Raises:
            JournalClosedError: the journal was closed.
        """
        if self._closed:
            raise JournalClosedError("InMemoryRunJournal is closed")
        self._events.extend(events)

    async def read_from(self, seq: int) -> list[JournalEvent]:
        """The retained events with ``seq >= seq``, in order."""
        return [event for event in self._events if event.seq >= seq]

    async def read_run(self, run_id: str, seq: int = 0) -> list[JournalEvent]:
        """The retained events of ``run_id`` with ``seq >= seq`` (``read_from``, filtered)."""
        return [event for event in await self.read_from(seq) if event.run_id == run_id]

    async def mark(self, mark: DispatchMark) -> None:
        """Keep a dispatch mark (``marks.DispatchMarks``) beside the events (as bounded).

        Raises:
            JournalClosedError: the journal was closed.
        """
        if self._closed:
            raise JournalClosedError("InMemoryRunJournal is closed")
        self._marks.append(mark)

    async def marks_of(self, run_id: str, above: int = 0) -> list[DispatchMark]:
        """The dispatch marks of ``run_id`` with ``seq > above``, in seq order."""
        found = [mark for mark in self._marks if mark.run_id == run_id and mark.seq > above]
        return sorted(found, key=lambda mark: mark.seq)

    async def close(self) -> None:
        """Refuse further appends; the retained events stay readable."""
        self._closed = True

    def describe(self) -> dict[str, Any]:
        """``{"kind": "InMemoryRunJournal"}``."""
        return {"kind": "InMemoryRunJournal"}

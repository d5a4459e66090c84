"""What the SQLite and PostgreSQL run journals share: rows, group commit, fencing, reading (D15).

A database journal keeps one row per event, keyed ``(run_id, seq)``, whose ``payload`` is the
event's OMA JSON object exactly as the JSONL journal writes its line (``to_json_line``), in a
table beside the store's own table in the same database. Appends of every run using the journal
go through one ``GroupCommit``: a batch is one transaction. (Every ``PostgresRunJournal`` of one
database and table in an event loop shares ONE set of batches and one pool: see its module.)

**Fenced appends.** When the run record (``__oma_run__/<id>``) lives in the same database, a
leased run's append is made under its lease (``append_fenced``): the record check the lease
hands out ("the record is exactly what this owner last wrote") is evaluated inside the batch's
transaction, on the store's table, before the run's rows are inserted. A run whose check fails
gets nothing inserted (its ``apply`` answers ``False`` and the lease decides whether it lost);
the other runs of the batch are unaffected. After a takeover not one event of the old owner
lands, exactly as none of its snapshots does.

A duplicate ``(run_id, seq)`` is refused with ``JournalDuplicateError`` for that append alone,
never overwritten; a row whose payload does not parse, or names another run or seq than its
key, raises ``JournalCorruptError`` naming the run and the seq.

**Redaction.** Given ``redact=`` patterns, a journal writes each event's own fields (``data``)
redacted by ``RedactingStore``'s rules plus those patterns, as ``JsonlRunJournal(redact=...)``
does, before the row is encoded: fenced and unfenced appends alike. The base fields (run, seq,
type, attribution) are the row's key and what a read checks it against, so they stay as they
are. An event sealed by an ``EncryptingJournal`` is stored as it comes: its payload is
ciphertext, which redaction cannot clean and could only break.

**Dispatch marks** (``marks``, issue 18) go to a ``<table>_marks`` table of the same database,
one row per mark keyed ``(run_id, seq, call_id)``, each in its own transaction after the events
it vouches for committed: deleting a run's newest event rows leaves its marks, so the loss is
seen.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from oma_actors.journal.batching import GroupCommit
from oma_actors.journal.codec import line_type, parse_line, to_json_line
from oma_actors.journal.errors import (
    JournalAppendError,
    JournalClosedError,
    JournalCorruptError,
    JournalDuplicateError,
)
from oma_actors.journal.marks import DispatchMark, mark_from_json
from oma_actors.journal.redaction import redacted_event
from oma_actors.stores.redaction import compile_patterns

if TYPE_CHECKING:
    import re
    from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence

    from oma_actors.journal.event import JournalEvent
    from oma_actors.stores.base import ConditionalStore, Expect, Write


NO_LAST = 2**63 - 1
"""The highest seq a journal row can hold (a signed 64-bit column): no upper bound."""


@dataclass(frozen=True, slots=True)
class JournalRow:
    """One event as a row: its key and its OMA JSON text."""

    run_id: str
    seq: int
    payload: str


@dataclass(frozen=True, slots=True)
class AppendPart:
    """One append's share of a batch: its rows, and the fence checks guarding them (if any)."""

    rows: tuple[JournalRow, ...]
    checks: tuple[Expect, ...] = ()


PartResult = bool | BaseException
"""Per part: ``True`` inserted, ``False`` a fence check failed (nothing inserted), or its error."""


class AppendFence(Protocol):
    """What a fenced append needs of a run lease (``oma_actors.runs.RunLeaseHandle`` is one)."""

    @property
    def fence_store(self) -> ConditionalStore | None:
        """The store holding the run record, when it can apply atomic batches."""
        ...

    async def fenced(self, apply: Callable[[list[Expect], list[Write]], Awaitable[bool]]) -> bool:
        """Run ``apply(checks, writes)`` under the lease; raise ``LeaseError`` when it is lost."""
        ...


@runtime_checkable
class FencedJournal(Protocol):
    """A journal that can carry a run lease's fence in its appends (the database journals)."""

    def shares_database(self, store: object) -> bool:
        """Whether ``store`` is the store whose table this journal's fence checks read."""
        ...

    async def append_fenced(self, events: Sequence[JournalEvent], fence: AppendFence) -> None:
        """Append one run's events in one transaction with the fence's record check."""
        ...


class SqlRunJournal(ABC):
    """The backend-independent part of a database run journal; see the module docstring.

    Args:
        name: how errors name the journal (a path, or a DSN without its password, and table).
        table: the journal's table.
        flush_interval_ms: the batching window opened by the first pending append.
        redact: extra patterns for RedactingStore's rules, applied to each event's payload at
            write time (``None`` writes events unredacted); see the module docstring.

    Raises:
        ConfigurationError: a ``redact`` pattern is invalid (``compile_patterns``).
    """

    kind = "SqlRunJournal"
    """``describe()["kind"]``, the snapshot's ``journalRef`` kind."""

    def __init__(
        self,
        name: str,
        table: str,
        *,
        flush_interval_ms: float,
        redact: Sequence[str | re.Pattern[str]] | None = None,
    ) -> None:
        self._name = name
        self._table = table
        self._patterns = None if redact is None else compile_patterns(redact)
        self._window_s = flush_interval_ms / 1000
        self._group: GroupCommit[AppendPart, bool] = GroupCommit(
            self._commit, window_s=self._window_s
        )
        self._closed = False

    @property
    def table(self) -> str:
        """The journal's table."""
        return self._table

    @property
    def batches(self) -> int:
        """Transactions committed or attempted so far (one per batch)."""
        return self._group.batches

    @property
    def redacts(self) -> bool:
        """Whether events are redacted as they are written (``redact=`` was given)."""
        return self._patterns is not None

    def describe(self) -> dict[str, Any]:
        """``{"kind", "store": "same-database", "table"}``: never a DSN (it may hold a password)."""
        return {"kind": self.kind, "store": "same-database", "table": self._table}

    async def append(self, events: Sequence[JournalEvent]) -> None:
        """Append events; returns when the transaction of their batch committed.

        Raises:
            JournalClosedError: the journal was closed.
            JournalDuplicateError: a ``(run_id, seq)`` is already stored; nothing of this
                append is.
            StoreError: the transaction failed; nothing of the batch is stored.
        """
        await self._append(events, (), now=False)

    async def append_now(self, events: Sequence[JournalEvent]) -> None:
        """``append``, closing the open batch's window at once (journal-first durability)."""
        await self._append(events, (), now=True)

    def append_nowait(self, events: Sequence[JournalEvent], *, now: bool) -> asyncio.Future[Any]:
        """Queue events into the open batch; the future is done when its transaction committed.

        The future is this append's own (``batching.AppendNowait``): its exception is the
        batch's error or ``JournalDuplicateError``; its result is ``True``.

        Raises:
            JournalClosedError: the journal was closed (nothing was queued).
        """
        self._check_open()
        rows = tuple(self._row(e) for e in events)
        if not rows:  # nothing to commit: done at once, as ``append`` returns at once
            done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            done.set_result(True)
            return done
        return self._enqueue(AppendPart(rows), now=now)

    async def append_fenced(self, events: Sequence[JournalEvent], fence: AppendFence) -> None:
        """Append one run's events in one transaction with ``fence``'s run record check.

        Raises:
            LeaseError: the run's lease is lost (``RUN_LEASE_LOST``); nothing was inserted.
            JournalAppendError: the events are of several runs, or the fence refused the
                append although the lease is held; nothing was inserted.
            JournalClosedError, JournalDuplicateError, StoreError: as ``append``.
        """
        if not events:
            return
        if len({event.run_id for event in events}) > 1:
            raise JournalAppendError(f"{self._name}: a fenced append holds events of one run")

        async def apply(checks: list[Expect], writes: list[Write]) -> bool:
            if writes:  # the fence only moves the record for a snapshot's checkpoint_ref
                raise JournalAppendError(f"{self._name}: a fenced append writes no store keys")
            return await self._append(events, tuple(checks), now=True)

        if not await fence.fenced(apply):
            raise JournalAppendError(
                f"{self._name}: the fenced append was refused although the lease is held"
            )

    async def read_from(self, seq: int) -> list[JournalEvent]:
        """Every stored event (of every run) with ``seq >= seq``, by seq.

        Raises:
            JournalCorruptError: a row's payload does not parse or does not match its key.
        """
        return self._decode(await self._select(None, seq))

    async def read_run(self, run_id: str, seq: int = 0) -> list[JournalEvent]:
        """The stored events of ``run_id`` with ``seq >= seq``, in seq order (an indexed read).

        Raises:
            JournalCorruptError: a row's payload does not parse or does not match its key.
        """
        return self._decode(await self._select(run_id, seq))

    async def read_range(
        self,
        run_id: str,
        first: int,
        last: int | None = None,
        *,
        types: Collection[str] | None = None,
    ) -> list[JournalEvent]:
        """The stored events of ``run_id`` with ``first <= seq <= last`` (``None``: no bound)
        of one of ``types`` (``None``: any), in seq order (``RangeReader``).

        The bound is the query's; a row whose payload shows another type at its start
        (``line_type``) is not parsed (a history point's fold reads only what it folds).

        Raises:
            JournalCorruptError: a row read does not parse or does not match its key.
        """
        wanted = None if types is None else frozenset(types)
        return self._decode(await self._select(run_id, first, last), wanted)

    async def mark(self, mark: DispatchMark) -> None:
        """Make a dispatch mark durable in the marks table (``marks.DispatchMarks``).

        Raises:
            JournalClosedError: the journal was closed.
            StoreError: the transaction failed.
        """
        self._check_open()
        await self._insert_mark(mark.run_id, mark.seq, mark.call_id, mark.to_json().decode())

    async def marks_of(self, run_id: str, above: int = 0) -> list[DispatchMark]:
        """The dispatch marks of ``run_id`` with ``seq > above``, in seq order.

        Raises:
            JournalCorruptError: a mark's payload does not parse or does not match its key.
        """
        self._check_open()
        marks = []
        for seq, call_id, payload in await self._select_marks(run_id, above):
            try:
                mark = mark_from_json(payload)
            except ValueError as exc:
                raise JournalCorruptError(f"{self._name}_marks", seq, "json", str(exc)) from None
            # The whole key: a payload naming another call would stand in for its row's call,
            # whose mark (what keeps it from running twice) would then be gone.
            if mark.run_id != run_id or mark.seq != seq or mark.call_id != call_id:
                raise JournalCorruptError(
                    f"{self._name}_marks",
                    seq,
                    "key",
                    f"the mark is run {mark.run_id!r}, seq {mark.seq}, call {mark.call_id!r} "
                    f"in the row of call {call_id!r}",
                )
            marks.append(mark)
        return marks

    async def delete_run(self, run_id: str) -> int:
        """Delete every event of ``run_id`` (a deleted run's journal); how many there were.

        Raises:
            JournalClosedError: the journal was closed.
            StoreError: the database failed; nothing was deleted.
        """
        self._check_open()
        return await self._delete(run_id)

    async def close(self) -> None:
        """Commit the open batch now, wait for every batch, release the connection.

        Later appends and reads raise ``JournalClosedError``.
        """
        self._closed = True
        await self._group.drain()
        await self._release()

    @abstractmethod
    def shares_database(self, store: object) -> bool:
        """Whether ``store`` is the store whose table this journal's fence checks read."""

    @abstractmethod
    async def _transact(
        self, parts: Sequence[AppendPart], results: list[PartResult | None]
    ) -> None:
        """Commit the parts whose result is still ``None`` in ONE transaction.

        Sets each such part's result: ``False`` when one of its checks fails against
        ``current`` (see ``fence_holds``), a ``JournalDuplicateError`` when a row is already
        stored, else ``True``. Raises when the transaction failed (nothing of it is stored).
        """

    @abstractmethod
    async def _select(
        self, run_id: str | None, seq: int, last: int | None = None
    ) -> Sequence[tuple[str, int, str]]:
        """``(run_id, seq, payload)`` rows with ``seq >= seq`` (of ``run_id`` when given; then
        with ``seq <= last`` too, unless ``last`` is ``None``), by seq."""

    @abstractmethod
    async def _delete(self, run_id: str) -> int:
        """Delete the rows (and marks) of ``run_id`` in one transaction; how many rows."""

    @abstractmethod
    async def _insert_mark(self, run_id: str, seq: int, call_id: str, payload: str) -> None:
        """Store one mark row, keyed ``(run_id, seq, call_id)`` (a stored key is replaced),
        and commit."""

    @abstractmethod
    async def _select_marks(self, run_id: str, above: int) -> Sequence[tuple[int, str, str]]:
        """``(seq, call_id, payload)`` mark rows of ``run_id`` with ``seq > above``, by seq."""

    @abstractmethod
    async def _release(self) -> None:
        """Close the connection or pool (called once, after the last batch)."""

    def _check_open(self) -> None:
        if self._closed:
            raise JournalClosedError(f"{self._name}: the journal is closed")

    async def _append(
        self, events: Sequence[JournalEvent], checks: tuple[Expect, ...], *, now: bool
    ) -> bool:
        self._check_open()
        if not events:
            return True
        rows = tuple(self._row(e) for e in events)
        # A part's error (a duplicate, the batch's failure) is raised by the batch's future.
        # Awaited as ``GroupCommit.submit`` awaits it: a cancelled appender cancels its own wait.
        return await self._enqueue(AppendPart(rows, checks), now=now)

    def redact_event(self, event: JournalEvent) -> JournalEvent:
        """``event`` with its payload redacted by the journal's rules (as it is written), or as
        it is when the journal redacts nothing or the payload is a sealed envelope
        (``EncryptingJournal`` redacts by these rules before it seals)."""
        return redacted_event(event, self._patterns)

    def _row(self, event: JournalEvent) -> JournalRow:
        """The event's row: its payload redacted first when the journal redacts (every append,
        fenced or not, encodes its rows here, so none of them skips the rules)."""
        event = self.redact_event(event)
        return JournalRow(event.run_id, event.seq, to_json_line(event))

    def _enqueue(self, part: AppendPart, *, now: bool) -> asyncio.Future[bool]:
        """Queue ``part`` into the open batch; its own future (``GroupCommit.enqueue``).

        The journal's own batches; a backend whose journals of one database share batches
        (``PostgresRunJournal``) queues into the shared ones instead.
        """
        return self._group.enqueue(part, now=now)

    async def _commit(self, parts: Sequence[AppendPart]) -> list[PartResult]:
        return await commit_batch(parts, self._transact, self.duplicate)

    def duplicate(self, run_id: str, seq: int) -> JournalDuplicateError:
        """The error of an append whose ``(run_id, seq)`` is already stored."""
        return JournalDuplicateError(self._name, run_id, seq)

    def _decode(
        self, rows: Iterable[tuple[str, int, str]], types: frozenset[str] | None = None
    ) -> list[JournalEvent]:
        """The rows' events, checked against their keys; with ``types``, only those types."""
        events = []
        for run_id, seq, payload in rows:
            if types is not None:
                shown = line_type(payload)
                if shown is not None and shown not in types:
                    continue
            try:
                event = parse_line(payload, line=seq, path=self._name)
            except JournalCorruptError:
                # The error again, naming the row (built only then: thousands of rows a read).
                parse_line(payload, line=seq, path=self._where(run_id, seq))
                raise
            if event.run_id != run_id or event.seq != seq:
                raise JournalCorruptError(
                    self._where(run_id, seq),
                    seq,
                    "key",
                    f"the payload is run {event.run_id!r} seq {event.seq}",
                )
            if types is None or event.type in types:
                events.append(event)
        return events

    def _where(self, run_id: str, seq: int) -> str:
        return f"{self._name}: run {run_id!r} seq {seq}"


async def commit_batch(
    parts: Sequence[AppendPart],
    transact: Callable[[Sequence[AppendPart], list[PartResult | None]], Awaitable[None]],
    duplicate: Callable[[str, int], JournalDuplicateError],
) -> list[PartResult]:
    """Commit one batch (a ``GroupCommit`` commit): one ``transact`` call, one answer per part.

    A ``(run_id, seq)`` twice in the batch refuses the later part with ``duplicate`` before the
    transaction (the database would keep only one of them).
    """
    results: list[PartResult | None] = [None] * len(parts)
    seen: set[tuple[str, int]] = set()
    for index, part in enumerate(parts):
        mine: set[tuple[str, int]] = set()
        for row in part.rows:
            key = (row.run_id, row.seq)
            if key in seen or key in mine:
                results[index] = duplicate(*key)
                break
            mine.add(key)
        else:
            seen |= mine
    await transact(parts, results)
    return [False if result is None else result for result in results]


def fence_holds(part: AppendPart, current: Mapping[str, str | None]) -> bool:
    """Whether every fence check of ``part`` holds against the store's ``current`` values."""
    return all(current.get(check.key) == check.value for check in part.checks)


def checked_keys(parts: Sequence[AppendPart], results: Sequence[PartResult | None]) -> list[str]:
    """The store keys the pending parts' fence checks read, each once, sorted (lock order)."""
    return sorted(
        {
            check.key
            for part, r in zip(parts, results, strict=True)
            if r is None
            for check in part.checks
        }
    )


__all__ = [
    "NO_LAST",
    "AppendFence",
    "AppendPart",
    "FencedJournal",
    "JournalRow",
    "PartResult",
    "SqlRunJournal",
    "checked_keys",
    "commit_batch",
    "fence_holds",
]

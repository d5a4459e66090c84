"""The run registry: run records in the state store, read and changed only through this object.

Records live under ``__oma_sidecar__/run/<run_id>`` in the state store (``--store``), one
``RunRecordV1`` per run (``sidecar.record_codec``); its events under
``__oma_sidecar__/events/<run_id>`` (``sidecar.run_history``: saved whole at the end; the run's
durable event log is its journal). Nothing else reads those keys.

Every change is :meth:`RunRegistry.update`: read the stored record, apply a pure change, and
write it back with the store's ``compare_and_set``, retrying on a conflict (another process, a
sibling sidecar sharing the store, wrote it: its write is never lost). Reads go to the store too
(a decoded record is cached by its stored text), so a record a sibling changed is seen as it is;
:meth:`RunRegistry.refresh` also takes in the history a sibling saved.

What a run is (running, interrupted, ended) and which sidecar holds it are its run record's
(``sidecar.authority``, D16): the registry stores no status and no owner (a restore or an
adoption takes the run's lease, then counts a new attempt here). It announces each change of a
run's status to watchers as a ``run_status`` event (:meth:`RunRegistry.announce`), and
announces an end that a sidecar which died never told (:meth:`RunRegistry.refresh`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors.errors import StoreError
from oma_actors.keyspace import sidecar_key
from oma_actors.runs import MemoryStoreRunStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.authority import outcome_of_record, settled_status
from sidecar.convert import now, timestamp
from sidecar.journal_watch import stream_last_seq
from sidecar.journals import RunJournals
from sidecar.record import (
    FINISHED,
    SEQ_BLOCK,
    Outcome,
    RunExistsError,
    RunRecordConflictError,
    RunRecordV1,
    UnknownRunError,
    UnreadableRunError,
    releasing_reservation,
    reserving_next_block,
    reserving_until,
)
from sidecar.record_codec import (
    RecordFormatError,
    decode,
    encode,
    shown_problem,
)
from sidecar.request_claims import RequestClaims
from sidecar.run_history import RunHistory, delete_key
from sidecar.run_log import KnownRun, RunLog, status_event
from sidecar.run_view import run_message
from sidecar.status import SidecarError

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from oma_actors.runs import RunRecord as LeaseRecord
    from oma_actors.stores import AtomicStore
    from sidecar.record import RunView, WireStatus

logger = logging.getLogger(__name__)

RUN_KIND = "run"
RUN_PREFIX = sidecar_key(RUN_KIND, "")
MAX_CAS_ATTEMPTS = 32


class RunRegistry:
    """Run records and logs, persisted through ``store``.

    Args:
        store: the state store; its compare-and-set guards every record write.
        spawn: schedules a background coroutine (owned by the server's task group).
        shared: several sidecars share the store (``sidecar.run_history``).
        journals: where runs keep their journals, whose seqs the ``last_event_seq`` of a run
            that keeps one counts (``None``: as ``--no-journal``, a journal found is still read).
    """

    def __init__(
        self,
        store: AtomicStore,
        *,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
        shared: bool = False,
        journals: RunJournals | None = None,
    ) -> None:
        self._store = store
        self._journals = journals or RunJournals(state_uri="memory://", enabled=False)
        self._spawn = spawn
        self._runs: dict[str, KnownRun] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._reserving: set[str] = set()
        self._settling: set[str] = set()
        self._history = RunHistory(store, shared=shared)
        self.requests = RequestClaims(store)
        """The claims of ``StartRun`` request_ids on their runs (``sidecar.request_claims``)."""
        self._run_records = MemoryStoreRunStore(store)  # the authority on each run's status
        self._unreadable: dict[str, str] = {}  # key -> the unreadable text last logged

    @property
    def store(self) -> AtomicStore:
        """The state store the records (and the runs' leases) are kept in."""
        return self._store

    async def find(self, run_id: str) -> RunRecordV1 | None:
        """The stored record of ``run_id``, or ``None``.

        Raises:
            UnreadableRunError: the record exists but cannot be decoded.
        """
        entry = await self._store.get(sidecar_key(RUN_KIND, run_id))
        if entry is None:
            return None
        return await self._record(run_id, entry.value)

    async def get(self, run_id: str) -> RunRecordV1:
        """The stored record of ``run_id`` (``UnknownRunError``, ``UnreadableRunError``)."""
        record = await self.find(run_id)
        if record is None:
            raise UnknownRunError(run_id)
        return record

    async def query(self) -> list[RunRecordV1]:
        """Every readable stored record, in store order."""
        found, _ = await self.scan()
        return found

    async def scan(self) -> tuple[list[RunRecordV1], dict[str, str]]:
        """Every readable stored record, and every one that cannot be read: run id -> the
        problem.

        A record that fails to decode must not make its run vanish: ``ListRuns`` shows it.
        """
        found: list[RunRecordV1] = []
        unreadable: dict[str, str] = {}
        for entry in await self._store.list(prefix=RUN_PREFIX):  # a range scan, not every key
            run_id = entry.key.removeprefix(RUN_PREFIX)
            try:
                found.append(await self._record(run_id, entry.value))
            except UnreadableRunError as exc:
                unreadable[run_id] = exc.problem
        return found, unreadable

    async def log_of(self, run_id: str) -> RunLog:
        """The event log of ``run_id`` (``UnknownRunError`` when there is no such run)."""
        await self.get(run_id)
        return self._runs[run_id].log

    async def refresh(self, run_id: str) -> None:
        """Re-read a run another sidecar writes: its saved history, its record, and whether its
        run record ended it (an end its sidecar died before telling is announced here).

        Raises:
            UnknownRunError: the run was deleted (here or by another sidecar): a watch of it
                ends, instead of waiting for an end a deleted run never tells.
        """
        entry = await self._store.get(sidecar_key(RUN_KIND, run_id))
        if entry is None:
            self.forget(run_id)
            raise UnknownRunError(run_id)
        known = self._runs.get(run_id)
        if known is not None:
            known.log.merge_history(await self._history.stored_events(known))
        record = await self._record(run_id, entry.value)
        known = self._runs.get(run_id)
        if known is not None:
            self._settle(run_id, known, record, await self._run_records.get(run_id))

    async def _record(self, run_id: str, text: str) -> RunRecordV1:
        """The record stored as ``text``, decoded unless it is the text already known.

        A read that began before a claim of this process wrote the run may return after it,
        with the record of an earlier attempt: the reader gets it (it was stored when the read
        began), but it is not taken in, so the events of the claimed attempt are stamped with
        its number (``emit``).

        Raises:
            UnreadableRunError: ``text`` is not a record this sidecar can read.
        """
        known = self._runs.get(run_id)
        if known is not None and known.text == text:
            return known.record
        try:
            record = decode(text)
        except RecordFormatError as exc:
            key = sidecar_key(RUN_KIND, run_id)
            if self._unreadable.get(key) != text:
                self._unreadable[key] = text
                logger.error("unreadable run record %s: %s", key, exc)
            raise UnreadableRunError(run_id, shown_problem(exc)) from None
        if known is None:
            known = await self._load(run_id, text, record)
        if record.attempt >= known.record.attempt:
            known.text, known.record = text, record
        return record

    async def _load(self, run_id: str, text: str, record: RunRecordV1) -> KnownRun:
        """A run this process has not seen: its log continues above the stored reservation."""
        reserved = record.seq_reserved_until
        log = RunLog(run_id, next_seq=reserved + 1, reserved_until=reserved)
        fresh = KnownRun(text=text, record=record, log=log)
        log.restore_history(await self._history.stored_events(fresh))
        return self._runs.setdefault(run_id, fresh)  # a concurrent read may have been first

    def _settle(
        self, run_id: str, known: KnownRun, record: RunRecordV1, lease: LeaseRecord | None
    ) -> None:
        """Announce an end that the run record ``lease`` of ``record`` has and the log never
        told.

        A crash between a run's end (its run record settled) and the announcement of it leaves
        a log whose last status says RUNNING: a watcher would wait forever. A background task
        emits the missing ``run_status`` event (and saves the history); never while this
        process writes the run (``announce`` tells that).
        """
        status = settled_status(record, lease)
        lock = self._locks.get(run_id)
        if (
            status is None
            or known.log.last_status == status
            or (lock is not None and lock.locked())
            or run_id in self._settling
        ):
            return
        self._settling.add(run_id)
        outcome = outcome_of_record(record, lease)
        self._spawn(self._announce_stored_status(run_id, status, outcome))

    async def _announce_stored_status(
        self, run_id: str, status: WireStatus, outcome: Outcome
    ) -> None:
        try:
            known, above = self._runs[run_id], list[int]()
            if await self._history.told_elsewhere(known, status):
                return
            record = await self.update(run_id, reserving_next_block(above))
            # Another sidecar may have used seqs up to the reservation it found: never reuse one.
            known.log.skip_to(above[-1] + 1)
            known.log.extend_reservation(record.seq_reserved_until)
            if known.log.last_status != status:
                self.emit(run_id, status_event(status, outcome))
                await self._history.save(known)
        finally:
            self._settling.discard(run_id)

    async def create(self, record: RunRecordV1) -> RunRecordV1:
        """Store a new run with its first block of event seqs.

        Raises:
            RunExistsError: a record of ``record.run_id`` exists already (it is attached).
        """
        record = replace(record, seq_reserved_until=SEQ_BLOCK)
        run_id = record.run_id
        async with self._lock_of(run_id):
            existing = await self.find(run_id)
            if existing is not None:
                raise RunExistsError(existing)
            text = encode(record)
            known = KnownRun(
                text=text,
                record=record,
                log=RunLog(run_id, next_seq=1, reserved_until=0),
            )
            # Known before the write, so a concurrent read of the new key finds this log.
            self._runs[run_id] = known
            try:
                written = await self._store.compare_and_set(
                    sidecar_key(RUN_KIND, run_id), None, text
                )
            except BaseException:
                self._runs.pop(run_id, None)
                raise
            if not written:  # another sidecar created it between our read and our write
                self._runs.pop(run_id, None)
                raise RunExistsError(await self.get(run_id))
        known.log.extend_reservation(record.seq_reserved_until)
        return record

    async def update(
        self, run_id: str, change: Callable[[RunRecordV1], RunRecordV1]
    ) -> RunRecordV1:
        """Apply ``change`` to the stored record and write it with a compare-and-set.

        ``change`` is a pure function of the record (it may run more than once, on a fresh read
        each time, when another writer wins). An exception it raises leaves the record as it
        is and propagates.

        Returns:
            The record as written (or as stored, when ``change`` changed nothing).

        Raises:
            UnknownRunError: there is no record of ``run_id``.
            RunRecordConflictError: other writers won ``MAX_CAS_ATTEMPTS`` times in a row.
        """
        key = sidecar_key(RUN_KIND, run_id)
        async with self._lock_of(run_id):
            for _ in range(MAX_CAS_ATTEMPTS):
                entry = await self._store.get(key)
                if entry is None:
                    raise UnknownRunError(run_id)
                record = await self._record(run_id, entry.value)
                new = change(record)
                if new == record:
                    return new
                text = encode(new)
                if await self._store.compare_and_set(key, entry.value, text):
                    known = self._runs[run_id]
                    known.text, known.record = text, new
                    return new
        raise RunRecordConflictError(run_id, MAX_CAS_ATTEMPTS)

    async def delete(self, record: RunRecordV1) -> int:
        """Delete the run of ``record`` (as its deletion claimed it): its record, events and
        request claim; forget it; how many keys were stored (the caller checked that no
        sidecar executes the run: ``sidecar.retention``)."""
        run_id = record.run_id
        deleted = await self.requests.release(record)
        deleted += await self._history.delete(run_id)
        deleted += await delete_key(self._store, sidecar_key(RUN_KIND, run_id))
        self.forget(run_id)
        return deleted

    def forget(self, run_id: str) -> None:
        """Drop what this process keeps of the run (it was deleted, maybe by a sibling)."""
        self._runs.pop(run_id, None)
        self._locks.pop(run_id, None)

    def told(self, run_id: str) -> WireStatus:
        """The last status this process's log of ``run_id`` told (``UNSPECIFIED``: none)."""
        known = self._runs.get(run_id)
        return known.log.last_status if known is not None else pb.RUN_STATUS_UNSPECIFIED

    def cached(self) -> dict[str, WireStatus]:
        """The runs this process keeps in memory, and the last status each one's log told."""
        return {run_id: known.log.last_status for run_id, known in self._runs.items()}

    def _lock_of(self, run_id: str) -> asyncio.Lock:
        return self._locks.setdefault(run_id, asyncio.Lock())

    async def announce(
        self,
        run_id: str,
        status: WireStatus,
        outcome: Outcome | None = None,
        *,
        change: Callable[[RunRecordV1], RunRecordV1] | None = None,
    ) -> RunRecordV1:
        """Write ``change`` and ``outcome`` into the record, then announce ``status`` (which
        the run record holds already, or a claim is about to take) as a ``run_status`` event.

        The write also reserves the next block of seqs if the log runs low, so the event has a
        durable seq. A finished run's history is kept.

        Raises:
            UnknownRunError: there is no record of ``run_id``.
        """
        log = await self.log_of(run_id)

        def apply(record: RunRecordV1) -> RunRecordV1:
            base = change(record) if change is not None else record
            reserved = base.seq_reserved_until
            if log.needs_block():
                reserved = max(reserved, log.wanted_reservation())
            return replace(
                base,
                updated_at=now(),
                outcome=outcome if outcome is not None else base.outcome,
                seq_reserved_until=reserved,
            )

        record = await self.update(run_id, apply)
        log.extend_reservation(record.seq_reserved_until)
        self.emit(run_id, status_event(status, record.outcome))
        if status in FINISHED:
            await self._history.save(self._runs[run_id])
        return record

    def emit(self, run_id: str, event: pb.RunEvent) -> None:
        """Append an event to the run's log, stamping run id, attempt and time.

        Raises:
            UnknownRunError: this process has not read or written the run.
        """
        known = self._runs.get(run_id)
        if known is None:
            raise UnknownRunError(run_id)
        event.run_id = run_id
        event.attempt = known.record.attempt
        if not event.HasField("time"):
            event.time.CopyFrom(timestamp(now()))
        known.log.add(event)
        if known.log.needs_block() and run_id not in self._reserving:
            self._reserving.add(run_id)
            self._spawn(self._reserve(run_id, known.log))

    async def _reserve(self, run_id: str, log: RunLog) -> None:
        try:
            while log.needs_block():
                record = await self.update(run_id, reserving_until(log.wanted_reservation()))
                log.extend_reservation(record.seq_reserved_until)
        finally:
            self._reserving.discard(run_id)

    async def close(self) -> None:
        """A graceful stop: every event logged here made durable, unused seqs given back.

        Called once the runs' tasks have ended. The next process continues each log right
        after its last event, so a watcher resuming across the restart is told of no gap;
        only a crash (no stop) leaves a reservation's unused seqs behind, reported as a gap.
        A run whose history cannot be saved keeps its reservation: its events may be lost.
        """
        for run_id, known in list(self._runs.items()):
            log = known.log
            if not log.published:
                continue  # only read here: its history and reservation are as stored
            try:
                await self._history.save(known)
                await self.update(run_id, releasing_reservation(log.reserved_until, log.last_used))
            except (StoreError, SidecarError) as exc:
                logger.warning("run %s: events not released at stop: %s", run_id, exc)

    async def run_message(self, view: RunView, *, full: bool) -> pb.Run:
        """The wire form of a run; its ``last_event_seq`` is the seq of the newest event of its
        default ``WatchRun`` stream (``sidecar.journal_watch.stream_last_seq``): its journal's
        when it keeps one, else its progress log's (0 for a run this process has not read)."""
        known = self._runs.get(view.run_id)
        last_seq = 0
        if known is not None:
            last_seq = await stream_last_seq(self._journals, view.record, known)
        return run_message(view, last_seq=last_seq, full=full)

"""``WatchRun``: a run's journal as the watch stream, event seq == journal seq.

The default stream of every run that keeps a journal (``journal=true`` insists on it; a run
without one then gives ``JOURNAL_UNAVAILABLE``; ``progress=true`` asks for the progress stream
instead, see :meth:`sidecar.servicer.RunServicer.WatchRun`).

The stream carries one ``RunEvent`` per journal event of the run (``sidecar.journals``): its
seq is the journal seq, which is durable and strictly increasing across attempts, so
``after_seq`` resumes exactly, also across sidecar restarts and restores (the file persists and
a restore continues its numbering). ``type`` is OMA's event type (``task/status``,
``tool/result``, ...), ``data`` the event's variant fields plus ``sourceEventSeqs``; ``run/end``
carries a ``run_status`` detail and ``task/status`` a ``task_status`` one. A run's
``last_event_seq`` counts the same seqs (:func:`stream_last_seq`): a client resumes from it.

The journal is read through its own reader above the last seq sent (``JournalTail``: a file
backwards from its end, parsing only the lines above the cursor; a database by its key), so a
watch shows what a restore folds: a trailing line counts when it parses, as the journal's
reader counts it, never a torn one. New lines are looked for when the run's
progress log changes (its progress events) and at least every poll interval, since some journal
appends come with no progress event.

Each attempt continues right above the last stored seq, also after a kill, so a graceful
restart or a clean adoption shows no gap. A hole between two events read is events really lost
from the journal and is reported as the progress stream reports one: a ``gap`` event with
``allow_gap``, else ``OUT_OF_RANGE`` / ``SEQ_EXPIRED``. That is a cut or edited journal, or a
kill -9 between a compaction's snapshot and the release of the events it held back (C06: they
reach the journal only once that snapshot is durable, which holds their facts).

The sidecar's own events that no journal holds (:data:`NOTICES`: status changes, host tool calls
dispatched, waiting or timed out) reach a journal watcher as live notices with seq 0, outside the
seq space (like heartbeats): only those this sidecar logs while the watch is open. ``types``
selects among them as among the journal's types, except that a ``run_status`` notice is sent
whatever ``types`` names, as on the progress stream (``sidecar.events.selected``).

The stream ends like the progress stream: once the run's status is terminal (or suspended,
unless ``follow_suspended``) and the journal has been read to its end; a ``run/end`` read ends
it once the run's record says so too, so a ``GetRun`` after the stream agrees with it. An
attempt closes its journal before its status is announced, so reading the status first and then
the file never misses the attempt's last events (``run/end``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, NoReturn

from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.journal import EVENT_TYPES, JournalCorruptError, read_run
from oma_actors.stores import parse_store_uri
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.attempt import end_status
from sidecar.events import RUN_STATUS, gap_event, selected
from sidecar.journals import JOURNAL_UNAVAILABLE
from sidecar.record import FINISHED, TERMINAL
from sidecar.status import DataLoss, FailedPrecondition, InvalidArgument

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from oma_actors.journal import JournalEvent, RunJournal
    from sidecar.execution import RunExecutor
    from sidecar.journals import RunJournals
    from sidecar.record import RunRecordV1
    from sidecar.run_log import KnownRun, RunLog
    from sidecar.runs import RunRegistry

logger = logging.getLogger(__name__)

FIELD = "journal"
SETTLE_FIRST_S = 0.02  # the record's write follows the journal's close at once
JOURNAL_MISSING = "JOURNAL_MISSING"


NOTICES = frozenset(
    {RUN_STATUS, "tool_call_dispatched", "tool_call_waiting", "tool_call_timed_out"}
)
"""The sidecar's own events, which no journal holds (a status change, a host tool call handed to
a host or waiting for one). A journal watch gets them live, as this sidecar's log has them while
the watch is open, with seq 0: outside the journal's seq space, never replayed. Everything else the
progress stream shows is in the journal (``task/status``, ``tool/call``, ``approval/request``,
``run/end`` with its status ...)."""


def notice(event: pb.RunEvent) -> pb.RunEvent:
    """``event`` of the progress log as a live notice of a journal watch (seq 0)."""
    copy = pb.RunEvent()
    copy.CopyFrom(event)
    copy.seq = 0
    return copy


class JournalTail:
    """The events of one run above a cursor, read through its journal's own reader.

    A file is read backwards from its end down to the cursor (``JsonlRunJournal.read_run``,
    only the lines above it parsed), a database by its ``(run_id, seq)`` key: a watch sees the
    very events a restore folds, a trailing line that parses included (the journal's reader
    counts it and its repair keeps it), a torn one not (a write in progress, or what a crash
    left, which the next append cuts off).

    Args:
        journal: the run's journal as ``RunJournals.reader`` gives it (sealed when the sidecar
            has keys: each payload is opened, a plaintext or forged one refused).
        run_id: the run; events of another run are left out.
        path: the journal's file (``None``: a database journal), to tell a lost file once the
            run has ended.
    """

    def __init__(self, journal: RunJournal, run_id: str, path: str | None = None) -> None:
        self.journal = journal
        self.run_id = run_id
        self.path = path

    async def read(self, after_seq: int, *, final: bool = False) -> list[JournalEvent]:
        """The events with seq above ``after_seq``, in order.

        ``final``: the run has ended, so a missing file is a lost journal, no longer one not
        yet created.

        Raises:
            DataLoss: a line or row is not a journal event of the run, or a sealed payload does
                not open (reason ``JOURNAL_CORRUPT``).
            FailedPrecondition: ``final`` and the file is missing (reason ``JOURNAL_MISSING``).
        """
        try:
            events = await read_run(self.journal, self.run_id, after_seq + 1)
        except (JournalCorruptError, CorruptStoreError) as exc:
            raise DataLoss("JOURNAL_CORRUPT", f"run {self.run_id!r}: {exc}") from None
        # The run has ended, so its journal was written: gone now, telling the client "no
        # events" would pass off a lost history as an empty one.
        path = self.path if final and not events else None
        if path is not None and not await asyncio.to_thread(os.path.isfile, path):
            raise FailedPrecondition(
                JOURNAL_MISSING,
                f"{FIELD}: the journal of run {self.run_id!r} is missing ({self.path})",
                metadata={"field": FIELD},
            )
        return events


def journal_message(event: JournalEvent) -> pb.RunEvent:
    """The wire form of a journal event: seq, attempt, OMA's type, fields and detail."""
    data = dict(event.data)
    if event.source_event_seqs is not None:
        data["sourceEventSeqs"] = list(event.source_event_seqs)
    message = pb.RunEvent(
        seq=event.seq,
        run_id=event.run_id,
        attempt=event.attempt,
        type=event.type,
        task_id=event.task_id or "",
        agent=event.agent_name or "",
        data=convert.dict_to_struct(data),
    )
    try:
        message.time.FromMilliseconds(event.timestamp_unix_ms)
    except (ValueError, OverflowError):
        message.ClearField("time")  # outside what a Timestamp holds: left out, not refused
    status = data.get("status")
    # OMA's ``status: {code}`` and ``error: {message}`` (journals written before read as bare
    # strings), mapped as the sidecar maps an attempt's result (a failed run is FAILED): the
    # same journal event reads the same on every watch, whatever the run did after it.
    code = status.get("code") if isinstance(status, dict) else status
    if event.type == "run/end" and isinstance(code, str):
        error = data.get("error")
        text = error.get("message") if isinstance(error, dict) else error
        text = text if isinstance(text, str) else ""
        message.run_status.status = end_status(code, text)
        message.run_status.outcome.code = code
        message.run_status.outcome.message = text
    elif event.type == "task/status" and isinstance(status, str) and status in convert.TASK_STATUS:
        message.task_status.status = convert.TASK_STATUS[status]
        reason = data.get("reason")
        message.task_status.reason = reason if isinstance(reason, str) else ""
    return message


async def journal_tail(journals: RunJournals, record: RunRecordV1) -> JournalTail:
    """The reader of ``record``'s journal, the run's default ``WatchRun`` stream (give its
    journal back with ``journals.release``).

    Raises:
        FailedPrecondition: the run keeps no journal, the message says why (reason
            ``JOURNAL_UNAVAILABLE``): its default stream is its progress stream.
        StoreError: the run's database journal could not be read.
    """
    if not record.store_uri:  # a record written before runs named their store
        _refuse(record, "its record names no checkpoint store")
    kind = parse_store_uri(record.store_uri).kind
    if record.request.checkpoint.disabled:
        _refuse(record, "it saves no checkpoints")
    if not journals.keeps(kind):
        _refuse(
            record,
            f"it checkpoints to a {kind} store (journals are kept beside file stores and "
            "in SQLite and PostgreSQL stores only)",
        )
    # Journals on: the run's first append creates its file.
    journal = await journals.reader(record.run_id, record.store_uri, unborn=True)
    if journal is None:
        _refuse(
            record,
            "this sidecar keeps no journals (--no-journal, or a --store that keeps none)",
        )
    path = journals.path_of(record.run_id, record.store_uri)
    return JournalTail(journal, record.run_id, path)


async def stream_last_seq(journals: RunJournals, record: RunRecordV1, known: KnownRun) -> int:
    """The seq of the newest event the run's default ``WatchRun`` stream delivers
    (``Run.last_event_seq``): its journal's newest seq when it keeps a journal, else its
    progress log's. ``WatchRun(after_seq=<it>)`` resumes right after it either way.

    Only the journal above ``known.journal_seq`` (the newest seq read before) is read, and
    that is raised to what it finds; once it was read after the run's log told a terminal
    status, not at all (an attempt closes its journal before its end is told, and a terminal
    run gets no other attempt). A journal that cannot be read now gives that lower bound,
    logged: a client resuming from it may be sent events again, never miss one.
    """
    if known.journal_final:
        return known.journal_seq
    final = known.log.last_status in TERMINAL  # told before the read: the journal is complete
    try:
        tail = await journal_tail(journals, record)
    except FailedPrecondition as exc:
        if exc.reason != JOURNAL_UNAVAILABLE:
            raise
        return known.log.last_seq
    except StoreError as exc:
        logger.warning("run %s: its journal cannot be read: %s", record.run_id, exc)
        return known.journal_seq
    try:
        events = await tail.read(known.journal_seq)
    except (DataLoss, StoreError, OSError) as exc:
        logger.warning("run %s: its journal cannot be read: %s", record.run_id, exc)
    else:
        if events:
            known.journal_seq = max(known.journal_seq, events[-1].seq)
        known.journal_final = final
    finally:
        await journals.release(tail.journal)
    return known.journal_seq


class JournalWatch:
    """Answers ``WatchRun`` (unless ``progress`` is set) for a run that keeps a journal.

    Args:
        registry: the run records and progress logs (status, and the wake-ups of a live run).
        executor: which runs execute here, and where runs keep their journals.
        heartbeat_s: a heartbeat after this long without an event.
        poll_s: how often the file is looked at without a progress event.
    """

    def __init__(
        self,
        *,
        registry: RunRegistry,
        executor: RunExecutor,
        heartbeat_s: float,
        poll_s: float,
    ) -> None:
        self._registry = registry
        self._executor = executor
        self._heartbeat_s = heartbeat_s
        self._poll_s = poll_s

    async def open(
        self, log: RunLog, request: pb.WatchRunRequest
    ) -> AsyncIterator[pb.RunEvent] | None:
        """The stream of ``request``'s run (checked here, before any event is sent).

        ``None`` when the run keeps no journal and ``request`` did not ask for the journal by
        name (``journal`` unset: the default stream): the caller then serves the run's progress
        stream, the only record such a run has of its events.

        Raises:
            InvalidArgument: ``types`` names a type no journal holds.
            FailedPrecondition: ``journal`` set and the run keeps no journal (reason
                ``JOURNAL_UNAVAILABLE``).
        """
        record = await self._registry.get(request.run_id)
        try:
            tail = await journal_tail(self._executor.journals, record)
        except FailedPrecondition as exc:
            if request.journal or exc.reason != JOURNAL_UNAVAILABLE:
                raise
            return None
        unknown = sorted(set(request.types) - EVENT_TYPES - NOTICES)
        if unknown:
            # Given back first: a database journal stays open while anyone holds it.
            await self._executor.journals.release(tail.journal)
            raise InvalidArgument(
                "types",
                f"{', '.join(map(repr, unknown))} is no journal event type (the run keeps a "
                f"journal, so types are OMA's: {', '.join(sorted(EVENT_TYPES))}; and the "
                f"sidecar's live notices: {', '.join(sorted(NOTICES))})",
            )
        return self._follow(log, tail, record, request)

    async def _follow(
        self,
        log: RunLog,
        tail: JournalTail,
        record: RunRecordV1,
        request: pb.WatchRunRequest,
    ) -> AsyncIterator[pb.RunEvent]:
        journals = self._executor.journals
        try:
            async with journals.woken(record.run_id, record.store_uri, log.wake) as pushed:
                async for event in self._stream(log, tail, request, pushed=pushed):
                    yield event
        finally:
            await journals.release(tail.journal)

    async def _stream(
        self,
        log: RunLog,
        tail: JournalTail,
        request: pb.WatchRunRequest,
        *,
        pushed: bool,
    ) -> AsyncIterator[pb.RunEvent]:
        """The stream; ``pushed``: new events wake ``log`` (a PostgreSQL journal's
        notifications), so the journal is not looked at on a timer."""
        types = set(request.types)
        cursor = request.after_seq
        # FINISHED is every status that ends a watch: the terminal ones and SUSPENDED.
        end = FINISHED - {pb.RUN_STATUS_SUSPENDED} if request.follow_suspended else FINISHED
        # An attempt a stopping sidecar gave up (INTERRUPTED) goes on in another: its run/end
        # ends no watch, whatever the record says until the run is adopted.
        ends_watch = end - {pb.RUN_STATUS_INTERRUPTED}
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        ended = False  # the last event read is a run/end whose status ends the watch
        heard = log.last_seq  # the log's events before the watch began are not live any more
        settle_s = SETTLE_FIRST_S  # after run/end: how long until the record is looked at
        while True:
            changed = log.changed()
            # The status first: an attempt's journal is closed before its status is announced.
            finished = log.last_status in end
            if ended and not finished:
                # A run/end read says the attempt ended, also of a run executing elsewhere; the
                # stream ends once the run's record says so too (it is written right after the
                # journal closes), so a GetRun after the stream shows the status it ended with.
                finished = (await self._executor.current(log.run_id)).status in end
            for event in await tail.read(cursor, final=finished):
                if cursor and event.seq > cursor + 1:
                    # A run's journal numbers its events without a hole, across attempts (each
                    # continues above the last stored seq): a hole is events lost (a cut or
                    # edited journal), never a restart. Before the first event a higher seq is
                    # no loss: a forked run's events start above its fork point.
                    first, last = cursor + 1, event.seq - 1
                    yield gap_event(log.run_id, allow_gap=request.allow_gap, first=first, last=last)
                cursor = event.seq
                message = journal_message(event)
                ended = event.type == "run/end" and message.run_status.status in ends_watch
                if selected(event.type, types):
                    quiet_since = loop.time()
                    yield message
            for event in log.since(heard):
                heard = event.seq
                # The run_status notices pass any types (``selected``): a watcher asking for
                # OMA's types alone must still learn that the run ended.
                if event.type in NOTICES and selected(event.type, types):
                    quiet_since = loop.time()
                    yield notice(event)
            if finished:
                return
            remote = not self._executor.running(log.run_id)
            wait = self._heartbeat_s if pushed else min(self._heartbeat_s, self._poll_s)
            if ended:
                # Nothing pushes the record's write: look again soon, then less and less often
                # (its writer may have died between the journal and the record: an adoption).
                wait, settle_s = min(wait, settle_s), settle_s * 2
            try:
                async with asyncio.timeout(wait):
                    await changed.wait()
            except TimeoutError:
                # A run executing in another sidecar tells its status through the store.
                if remote:
                    await self._registry.refresh(log.run_id)
            if loop.time() - quiet_since >= self._heartbeat_s:
                quiet_since = loop.time()
                yield pb.RunEvent(
                    run_id=log.run_id, type="heartbeat", time=convert.timestamp(convert.now())
                )


def _refuse(record: RunRecordV1, why: str) -> NoReturn:
    raise FailedPrecondition(
        JOURNAL_UNAVAILABLE,
        f"{FIELD}: run {record.run_id!r} keeps no journal: {why}",
        metadata={"field": FIELD},
    )

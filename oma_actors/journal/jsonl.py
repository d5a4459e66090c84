"""``JsonlRunJournal``: OMA's JSONL run journal, one event a line, group-committed (JR-04, D6).

Appends are batched: the first pending event opens a window of ``flush_interval_ms`` that later
events do not extend; the batch is then written with one ``os.write`` on an ``O_APPEND`` file
descriptor and one ``fsync``, off the event loop. Every ``append`` whose events are in a batch
returns when that fsync has returned (or raises its error), so concurrent appenders, of one run
or of many runs sharing the file, share one fsync. A batch that was written while the previous
one was on its way to disk waits for it and then carries everything that accumulated meanwhile.

Reading tolerates exactly one kind of damage: a trailing line that does not parse, which is what
a crash mid-write leaves; it counts as not written (D6) and the first append cuts it off, so it
never becomes a bad line in the middle. Any other bad line raises ``JournalCorruptError``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from typing import TYPE_CHECKING, Any

from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.journal.codec import (
    parse_line,
    parse_lines_bytes,
    peek_seq,
    spelled_run_id,
    to_json_object,
)
from oma_actors.journal.errors import JournalClosedError, JournalCorruptError
from oma_actors.journal.jsjson import js_dumps
from oma_actors.journal.jsonl_marks import JsonlMarkFile, marks_path
from oma_actors.journal.jsonl_scan import RunDirectory, scan_run
from oma_actors.journal.redaction import redacted_event
from oma_actors.stores.file_io import (
    UncutAppendError,
    append_synced,
    check_regular,
    make_directories,
    open_for_append,
    read_regular,
)
from oma_actors.stores.io_thread import IoThread
from oma_actors.stores.redaction import compile_patterns

if TYPE_CHECKING:
    import re
    from collections.abc import Collection, Sequence

    from oma_actors.journal.event import JournalEvent
    from oma_actors.journal.marks import DispatchMark

_CHUNK = 64 * 1024

MAX_JOURNAL_BYTES = 1 << 30
"""The largest journal file a read takes (1 GiB; ``JsonlRunJournal.max_read_bytes``)."""


class JsonlRunJournal:
    """A run journal in a JSONL file; one writer per file (JR-04).

    Only a regular file is a journal: a FIFO, a device or a directory is refused before any
    read or write, and a read refuses a file over ``max_read_bytes`` (set it on an instance to
    raise or lower the bound) rather than loading it, with ``CorruptStoreError`` either way.
    """

    max_read_bytes: int = MAX_JOURNAL_BYTES

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_interval_ms: float = 50,
        redact: Sequence[str | re.Pattern[str]] | None = None,
    ) -> None:
        """Open (lazily: nothing is touched before the first append or read) a journal file.

        Args:
            path: the JSONL file; a missing file is an empty journal.
            flush_interval_ms: the batching window opened by the first pending event.
            redact: extra patterns for RedactingStore's rules, applied at write time (``None``
                writes events unredacted).
        """
        self._path = os.fspath(path)
        self._delay = max(0.0, flush_interval_ms) / 1000
        self._patterns = None if redact is None else compile_patterns(redact)
        self._fd: int | None = None
        self._tail_checked = False
        # The open batch: its lines, its future (shared by every appender in it), the timer of
        # its window and whether that window closed; the future of the batch on its way to
        # disk, if any.
        self._pending: list[str] = []
        self._batch: asyncio.Future[None] | None = None
        self._window: asyncio.Handle | None = None
        self._due = False
        self._writing: asyncio.Future[None] | None = None
        self._thread = IoThread(f"oma-journal:{os.path.basename(self._path)}")
        self._closed = False
        # Which runs the file holds, so a run starting on a shared journal skips the scan; used
        # from reader threads, hence its own lock.
        self._directory = RunDirectory()
        self._directory_lock = threading.Lock()
        # Dispatch marks (issue 18): beside the file, never in it, so a cut tail leaves them.
        self._marks = JsonlMarkFile(marks_path(self._path))

    @property
    def path(self) -> str:
        """The journal file."""
        return self._path

    async def mark(self, mark: DispatchMark) -> None:
        """Make a dispatch mark durable in ``<path>.marks`` (``marks.DispatchMarks``).

        Raises:
            JournalClosedError: the journal was closed.
            StoreError: the write or the fsync failed.
        """
        if self._closed:
            raise JournalClosedError(f"{self._path}: the journal is closed")
        await self._marks.mark(mark)

    async def marks_of(self, run_id: str, above: int = 0) -> list[DispatchMark]:
        """The dispatch marks of ``run_id`` with ``seq > above`` (``marks.DispatchMarks``).

        Raises:
            JournalCorruptError, CorruptStoreError, StoreError: as ``JsonlMarkFile.marks_of``.
        """
        return await self._marks.marks_of(run_id, above)

    @property
    def redacts(self) -> bool:
        """Whether events are redacted as they are written (``redact=`` was given)."""
        return self._patterns is not None

    def describe(self) -> dict[str, Any]:
        """``{"kind": "JsonlRunJournal", "path": ...}``, the snapshot's ``journalRef``."""
        return {"kind": "JsonlRunJournal", "path": self._path}

    async def append(self, events: Sequence[JournalEvent]) -> None:
        """Append events; returns when the batch holding them is written and fsynced.

        Raises:
            JournalClosedError: the journal was closed.
            StoreError: the write or the fsync failed (the batch's bytes were cut off again).
        """
        await self._append(events, now=False)

    async def append_now(self, events: Sequence[JournalEvent]) -> None:
        """``append``, but the open batch goes to disk without waiting out its window.

        For a writer whose run waits on these events (journal-first durability, D10): the batch
        still carries whatever other appenders put in it, and appends arriving while its fsync
        runs form the next batch, so concurrent runs keep sharing fsyncs (group commit).

        Raises:
            JournalClosedError: the journal was closed.
            StoreError: the write or the fsync failed (the batch's bytes were cut off again).
        """
        await self._append(events, now=True)

    def append_nowait(self, events: Sequence[JournalEvent], *, now: bool) -> asyncio.Future[None]:
        """Queue events into the open batch (``now``: and close its window); return its future.

        The future is the batch's, shared by every appender in it (``batching.AppendNowait``):
        add a done callback, never await it directly. Events are encoded here, once.

        Raises:
            JournalClosedError: the journal was closed (nothing was queued).
            TypeError, ValueError: an event is not a JSON value (nothing was queued).
        """
        if self._closed:
            raise JournalClosedError(f"{self._path}: the journal is closed")
        lines = [self._encode(event) for event in events]
        batch = self._batch
        if batch is None:
            loop = asyncio.get_running_loop()
            self._batch = batch = loop.create_future()
            # A window of 0 still closes on the next turn of the loop, not at once: appends
            # made in the same turn (concurrent runs sharing the file) ride in one batch.
            if now or self._delay <= 0:
                self._window = loop.call_soon(self._close_window)
            else:
                self._window = loop.call_later(self._delay, self._close_window)
        elif now and not self._due and self._delay > 0 and self._window is not None:
            self._window.cancel()
            self._window = asyncio.get_running_loop().call_soon(self._close_window)
        self._pending.extend(lines)
        return batch

    async def _append(self, events: Sequence[JournalEvent], *, now: bool) -> None:
        if self._closed:
            raise JournalClosedError(f"{self._path}: the journal is closed")
        if not events:
            return
        # Shielded: a cancelled appender must not cancel the batch other appenders wait on.
        await asyncio.shield(self.append_nowait(events, now=now))

    async def read_from(self, seq: int) -> list[JournalEvent]:
        """Every event on disk with ``seq >= seq``, in file order (pending batches excluded).

        A line that shows a seq below ``seq`` unparsed (``peek_seq``: the fields it ends with,
        ``...,"seq":N,"timestampUnixMs":T,"runId":"...","attempt":A}`` as this module and OMA
        write lines, or its start ``{"type":...,"seq":N,`` as earlier versions wrote them) is
        skipped, so a restore reading its short tail does not parse the whole run;
        ``read_from(0)`` (``oma verify``) reads and checks every line.

        Raises:
            JournalCorruptError: a line other than a torn trailing one is unreadable.
            CorruptStoreError: the path is not a regular file, or is over ``max_read_bytes``.
            StoreError: the file cannot be read.
        """
        events = await asyncio.to_thread(self._read_all, seq)
        return [event for event in events if event.seq >= seq]

    async def read_run(self, run_id: str, seq: int = 0) -> list[JournalEvent]:
        """The events of ``run_id`` on disk with ``seq >= seq``, in file order.

        Reads the file backwards from its end to the run's last line below ``seq`` (the seek
        point), looking only at each line's seq and run id on the way (``jsonl_scan``); other
        runs' lines are not parsed. When the seek point or a line does not check out, the whole file
        is read and checked as ``read_from`` does, so the answer is the same either way.

        Raises:
            JournalCorruptError: as ``read_from``.
            CorruptStoreError: as ``read_from``.
            StoreError: the file cannot be read.
        """
        return await asyncio.to_thread(self._read_run, run_id, max(seq, 1))

    async def read_range(
        self,
        run_id: str,
        first: int,
        last: int | None = None,
        *,
        types: Collection[str] | None = None,
    ) -> list[JournalEvent]:
        """The events of ``run_id`` on disk with ``first <= seq <= last`` (``last=None``: no
        bound), of one of ``types`` (``None``: any), in file order.

        ``read_run`` that parses no other line (a history point's fold reads up to it, and a
        history listing reads only the types that make points).

        Raises:
            JournalCorruptError: as ``read_from``.
            CorruptStoreError: as ``read_from``.
            StoreError: the file cannot be read.
        """
        wanted = None if types is None else frozenset(types)
        return await asyncio.to_thread(self._read_run, run_id, max(first, 1), last, wanted)

    def _read_run(
        self,
        run_id: str,
        start: int,
        last: int | None = None,
        types: frozenset[str] | None = None,
    ) -> list[JournalEvent]:
        run = spelled_run_id(run_id)
        try:
            fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"{self._path}: journal read failed: {exc}") from exc
        try:
            check_regular(fd, self._path, self.max_read_bytes, what="run journal")
            info = os.fstat(fd)
            with self._directory_lock:
                # A run starting on a shared journal (or once the directory exists): a run
                # without a line needs no scan. A restore's first read does not build it.
                asks = start == 1 or self._directory.offset > 0
                if asks and self._directory.holds(fd, info, run) is False:
                    return []
            kinds = None if types is None else frozenset(kind.encode() for kind in types)
            lines = scan_run(fd, info.st_size, run, start, self._path, kinds)
        except OSError as exc:
            raise StoreError(f"{self._path}: journal read failed: {exc}") from exc
        finally:
            os.close(fd)
        if lines is not None:
            try:
                return parse_lines_bytes(
                    [line for seq, line in lines if last is None or seq <= last], path=self._path
                )
            except (JournalCorruptError, UnicodeDecodeError):
                pass  # the whole-file read below names the bad line, or skips a torn one
        return [
            e
            for e in self._read_all(start)
            if e.seq >= start
            and e.run_id == run_id
            and (last is None or e.seq <= last)
            and (types is None or e.type in types)
        ]

    async def close(self) -> None:
        """Flush the open batch now, wait for every write, close the file; later appends raise.

        Returns once the pending appends are written and fsynced, and the journal's threads
        (its own and its marks file's) have ended.
        """
        self._closed = True
        if self._batch is not None and not self._due:
            if self._window is not None:
                self._window.cancel()
            self._close_window()
        try:
            while (waited := self._writing or self._batch) is not None:
                await asyncio.wait([waited])  # its outcome is its appenders' to take
            await self._marks.close()
            if self._fd is not None:
                fd, self._fd = self._fd, None
                await self._thread.submit(os.close, fd)
        finally:
            # Not left to the idle end: a process closing many journals would keep their
            # threads that much longer.
            await self._thread.close()

    def redact_event(self, event: JournalEvent) -> JournalEvent:
        """``event`` with its payload redacted by the journal's rules (as it is written), or as
        it is when the journal redacts nothing or the payload is a sealed envelope
        (``EncryptingJournal`` redacts by these rules before it seals). The base fields (the
        run id, the seq) are never redacted: a line must keep naming its run."""
        return redacted_event(event, self._patterns)

    def _encode(self, event: JournalEvent) -> str:
        return js_dumps(to_json_object(self.redact_event(event)))

    def _close_window(self) -> None:
        """The open batch's window closed: it goes to disk once the batch before it is there."""
        self._window = None
        self._due = True
        self._write_next()

    def _write_next(self) -> None:
        # One batch on its way at a time, in order: whatever arrived while the previous batch
        # was written rides in this one.
        if self._writing is not None or not self._due or self._batch is None:
            return
        lines, batch = self._pending, self._batch
        self._pending, self._batch, self._due = [], None, False
        self._writing = batch
        # Answered straight from the thread (``IoThread.call``): a future of the thread's own
        # would settle the batch one turn of the loop later, on every durable boundary.
        self._thread.call(
            self._write,
            ("".join(f"{line}\n" for line in lines),),
            functools.partial(self._written, batch),
        )

    def _written(
        self, batch: asyncio.Future[None], _result: None, error: BaseException | None
    ) -> None:
        self._writing = None
        if error is not None:
            batch.set_exception(error)
            batch.exception()  # retrieved: waiters that were cancelled must not log it
        else:
            batch.set_result(None)
        self._write_next()

    def _write(self, text: str) -> None:
        try:
            append_synced(self._open_for_append(), text.encode())
        except UncutAppendError as exc:
            self._tail_checked = False  # part of the batch may remain: repair on the next append
            raise StoreError(f"{self._path}: journal append failed: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"{self._path}: journal append failed: {exc}") from exc

    def _open_for_append(self) -> int:
        if self._fd is None:
            _make_parent(self._path)
            # A new journal's name is made durable with its first events: a journal-first
            # snapshot names this file, and a crash must not leave it naming none.
            self._fd = open_for_append(self._path, what="run journal", sync_new_name=True)
        if not self._tail_checked:
            _repair_tail(self._fd, self._path)
            self._tail_checked = True
        return self._fd

    def _read_all(self, start: int = 0) -> list[JournalEvent]:
        try:
            raw = read_regular(self._path, self.max_read_bytes, what="run journal")
        except FileNotFoundError:
            return []
        except CorruptStoreError:
            raise
        except OSError as exc:
            raise StoreError(f"{self._path}: journal read failed: {exc}") from exc
        lines = raw.split(b"\n")
        last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
        events: list[JournalEvent] = []
        for index, line in enumerate(lines):
            if not line.strip():
                continue
            if start > 1 and index != last:
                seq = peek_seq(line)
                if seq is not None and seq < start:
                    continue
            try:
                events.append(
                    parse_line(
                        _decode(line, index + 1, self._path), line=index + 1, path=self._path
                    )
                )
            except JournalCorruptError:
                if index == last:
                    break  # a torn trailing line: not written (D6)
                raise
        return events


def _make_parent(path: str) -> None:
    """Create the journal file's missing parent directories, as ``FileStore`` does for its file.

    Without them every append fails while the run goes on, and its journal-first snapshots
    name a file that never exists. Same policy as ``FileStore`` (``make_directories``: that is
    ``os.makedirs`` with the default mode), so the process umask decides (the file itself is
    created ``0o600``). A failed sync of a new directory's parent fails the append; the
    directory then exists, and the next attempt syncs only the file's own directory (a known
    gap, for an ``EIO`` there).
    """
    directory = os.path.dirname(path)
    if directory:  # a bare file name lives in the working directory, which exists
        # Each new directory's name made durable in its parent: the file's own name is synced
        # into its directory with its first events (``open_for_append``).
        make_directories(directory, strict=True)


def _decode(line: bytes, number: int, path: str) -> str:
    try:
        return line.decode()
    except UnicodeDecodeError as exc:
        raise JournalCorruptError(path, number, "json", f"not UTF-8 ({exc})") from None


def _repair_tail(fd: int, path: str) -> None:
    """Cut a trailing line that does not parse; end a parsing one that lacks its newline."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    start = _last_line_start(fd, size)
    tail = os.pread(fd, size - start, start)
    complete = tail.endswith(b"\n")
    try:
        parse_line(_decode(tail.rstrip(b"\n"), 0, path), path=path)
    except JournalCorruptError:
        os.ftruncate(fd, start)
        os.fsync(fd)
        return
    if not complete:
        os.write(fd, b"\n")


def _last_line_start(fd: int, size: int) -> int:
    end = size - 1  # skip the newline that ends the last line, if any
    while end > 0:
        begin = max(0, end - _CHUNK)
        chunk = os.pread(fd, end - begin, begin)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return begin + cut + 1
        end = begin
    return 0

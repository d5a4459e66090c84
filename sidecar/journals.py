"""Run journals of the sidecar: each run's durable journal where its store is (D10, D15).

A checkpointed run whose checkpoint store is a file store keeps a JSONL journal at
``<store file>.journals/<name>.jsonl``, ``<name>`` derived from the run id (:func:`journal_name`);
a run on a SQLite or PostgreSQL store keeps its events in that database's journal table
(``open_journal(store_uri)``, one journal per database shared by every run of the process, so
their appends share transactions; closed once no run, watch or request uses it and more than
``MAX_IDLE_JOURNALS`` such journals are open, and opened again on its next use). Its attempts
run journal-first (``JournalOptions(durable=True)``): each per-turn boundary is saved by a
durable journal append and the snapshot in the store is rewritten only at compaction points; a
restore folds the tail. A leased run on a database journal appends under its lease's fence
(D15): after a takeover not one event of the old owner lands.

``memory://`` and Redis stores keep no journal, nor does a sidecar started with
``--no-journal``: their runs save whole snapshots. A run that has a journal keeps using it when
restored, whatever the server's setting, because its newest tool commits may be in the journal
alone: a restore without it would run them again.

A journal file and its directory are private to the sidecar's user (0600 and 0700), like the
state and token files. One writer per file holds because the state file's lock admits one
sidecar per store file. On PostgreSQL a reader following a run is woken by the journal's
notifications (LISTEN/NOTIFY), not by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import stat
from collections import OrderedDict
from typing import TYPE_CHECKING

import grpc

from oma_actors import JournalOptions
from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.journal import (
    EncryptingJournal,
    JournalCorruptError,
    JsonlRunJournal,
    open_journal,
    read_run,
)
from oma_actors.journal.open import DATABASE_STORE_KINDS
from oma_actors.journal.postgres import PostgresRunJournal
from oma_actors.journal.sql import SqlRunJournal
from oma_actors.stores import parse_store_uri
from sidecar.status import DataLoss, FailedPrecondition, InvalidArgument, SidecarError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from oma_actors.journal import JournalEvent, RunJournal
    from oma_actors.stores import KeyRing
    from sidecar._pb.oma.v1 import sidecar_pb2 as pb

logger = logging.getLogger(__name__)

JOURNALS_SUFFIX = ".journals"
JOURNAL_EXT = ".jsonl"
JOURNAL_UNAVAILABLE = "JOURNAL_UNAVAILABLE"
_HASH_CHARS = 16  # 64 bits of sha256: the part that keeps names apart (case-folding too)
_READABLE_CHARS = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class JournalFileError(SidecarError):
    """A run's journal file could not be created or removed (``path`` in the metadata).

    A removal that fails leaves the run's record in place, so the deletion can be repeated.
    """

    code = grpc.StatusCode.INTERNAL

    def __init__(self, reason: str, path: str, action: str, exc: OSError) -> None:
        problem = exc.strerror or type(exc).__name__
        super().__init__(
            reason, f"run journal {path}: could not {action} it: {problem}", metadata={"path": path}
        )


def journal_name(run_id: str) -> str:
    """A file name for ``run_id``'s journal: a sha256 prefix of the exact id (distinct for ids
    that differ only in case or in characters replaced) and a readable, sanitized part."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:_HASH_CHARS]
    readable = _UNSAFE.sub("_", run_id)[:_READABLE_CHARS]
    return f"{digest}-{readable}{JOURNAL_EXT}"


FILE_KIND = "file"
MAX_IDLE_JOURNALS = 32
"""How many database journals no run, watch or request uses stay open (the least recently used
beyond are closed), as ``sidecar.stores.MAX_IDLE_STORES`` for the stores beside them."""


class _Shared:
    """The open journal of one database, and how many use it now (``kept``: never closed)."""

    __slots__ = ("journal", "kept", "users")

    def __init__(self, journal: SqlRunJournal) -> None:
        self.journal = journal
        self.users = 0
        self.kept = False


class RunJournals:
    """Which runs keep a journal, where it is, and opening, reading and removing it.

    Args:
        state_uri: the normalized ``--store``; journals are kept when it is a file, SQLite or
            PostgreSQL store.
        enabled: ``False`` (``--no-journal``): new runs keep none.
        keyring: ``--encryption-keys``: every journal is an ``EncryptingJournal`` (payloads
            sealed at rest) and every reader opens events with these keys.
    """

    def __init__(
        self, *, state_uri: str, enabled: bool = True, keyring: KeyRing | None = None
    ) -> None:
        self._state_kind = parse_store_uri(state_uri).kind
        self.enabled = enabled and self.keeps(self._state_kind)
        self.keyring = keyring
        self._databases: dict[str, _Shared] = {}
        self._idle: OrderedDict[str, None] = OrderedDict()  # least recently used first
        self._closing: dict[str, asyncio.Task[None]] = {}
        self._listeners: dict[str, _Listener] = {}
        self._lock = asyncio.Lock()

    @staticmethod
    def keeps(kind: str) -> bool:
        """Whether a store of ``kind`` keeps run journals (a file store beside it, a database
        in it)."""
        return kind == FILE_KIND or kind in DATABASE_STORE_KINDS

    def path_of(self, run_id: str, store_uri: str) -> str | None:
        """Where the JSONL journal of a run checkpointing to ``store_uri`` is (``None``: a
        store kept by no file, whose journal, if any, is in its database)."""
        target = parse_store_uri(store_uri)
        if target.kind != FILE_KIND:
            return None
        return os.path.join(target.location + JOURNALS_SUFFIX, journal_name(run_id))

    def check_request(self, options: pb.CheckpointOptions, store_uri: str) -> None:
        """Refuse a request asking for a journal that its run would not get.

        Raises:
            FailedPrecondition: the server keeps no journals (``--no-journal``, or a
                ``--store`` that keeps none); reason ``JOURNAL_UNAVAILABLE``.
            InvalidArgument: the run saves no checkpoint, or its store keeps no journal.
        """
        if not options.journal:
            return
        field = "checkpoint.journal"
        if not self.enabled:
            why = (
                "this sidecar runs with --no-journal"
                if self.keeps(self._state_kind)
                else f"this sidecar's --store is a {self._state_kind} store, and journals are "
                "kept beside file stores and in SQLite and PostgreSQL stores only"
            )
            raise FailedPrecondition(
                JOURNAL_UNAVAILABLE,
                f"{field}: run journals are off: {why} (ServerInfo capability 'journal')",
                metadata={"field": field},
            )
        if options.disabled:
            raise InvalidArgument(
                field, "a run without checkpoints keeps no journal", reason=JOURNAL_UNAVAILABLE
            )
        kind = parse_store_uri(store_uri).kind
        if not self.keeps(kind):
            raise InvalidArgument(
                field,
                f"a {kind} checkpoint store keeps no journal (journals are kept beside file:// "
                "stores and in sqlite:// and postgresql:// stores)",
                reason=JOURNAL_UNAVAILABLE,
            )

    async def open(self, run_id: str, store_uri: str) -> RunJournal | None:
        """The journal an attempt of the run writes (give it back with :meth:`release`).

        A new run gets one when journals are on; a run whose journal exists always gets it
        back (its tail may hold commits no snapshot has).

        Raises:
            JournalFileError: the run's journal file could not be created.
            StoreError: the run's database journal could not be read.
        """
        journal = await self.reader(run_id, store_uri, unborn=True)
        path = self.path_of(run_id, store_uri)
        if journal is not None and path is not None:
            try:
                await asyncio.to_thread(_create_private, path)
            except OSError as exc:
                raise JournalFileError("JOURNAL_OPEN_FAILED", path, "create", exc) from None
        return journal

    async def reader(
        self, run_id: str, store_uri: str, *, unborn: bool = False
    ) -> RunJournal | None:
        """The run's journal as its attempts write it (sealed with the sidecar's keys), to
        read through its own reader, or ``None`` when the run keeps none; give it back with
        :meth:`release`.

        ``unborn``: a file journal not created yet counts when journals are on (the run's
        first append creates it; until then it reads empty).

        Raises:
            StoreError: the run's database journal could not be read.
        """
        if parse_store_uri(store_uri).kind in DATABASE_STORE_KINDS:
            journal = await self.database(store_uri)
            try:
                if not self.enabled and not await journal.read_run(run_id):
                    await self.release(journal)
                    return None
            except BaseException:
                await self.release(journal)
                raise
            return self.sealed(journal)
        path = self.path_of(run_id, store_uri)
        if path is None:
            return None
        if not (unborn and self.enabled) and not await asyncio.to_thread(os.path.isfile, path):
            return None
        return self.sealed(JsonlRunJournal(path, flush_interval_ms=0))

    def sealed(self, journal: RunJournal) -> RunJournal:
        """``journal`` as the runs use it: sealed when the sidecar has keys."""
        return journal if self.keyring is None else EncryptingJournal(journal, self.keyring)

    async def release(self, journal: RunJournal) -> None:
        """An attempt is done with ``journal``: a file's is closed, a database's stays open
        for the other runs of that database while the database journals nobody uses are at
        most ``MAX_IDLE_JOURNALS`` (the least recently used beyond are closed)."""
        inner = journal.inner if isinstance(journal, EncryptingJournal) else journal
        for uri, shared in self._databases.items():
            if shared.journal is inner:
                self._give_back(uri, shared)
                return
        await journal.close()

    async def database(self, store_uri: str) -> SqlRunJournal:
        """The journal of the database ``store_uri`` names, shared by every run of it; give
        it back with :meth:`release`."""
        while True:
            closing = self._closing.get(store_uri)
            if closing is not None:  # one journal per database at a time: its last one first
                await asyncio.wait([closing])
                continue
            async with self._lock:
                if store_uri in self._closing:
                    continue
                shared = self._databases.get(store_uri)
                if shared is None:
                    opened = open_journal(store_uri)
                    assert isinstance(opened, SqlRunJournal)  # DATABASE_STORE_KINDS: SQL ones
                    shared = self._databases[store_uri] = _Shared(opened)
                shared.users += 1
                self._idle.pop(store_uri, None)
                return shared.journal

    def _give_back(self, uri: str, shared: _Shared) -> None:
        shared.users -= 1
        if shared.users > 0 or shared.kept:
            return
        self._idle[uri] = None
        while len(self._idle) > MAX_IDLE_JOURNALS:
            oldest, _ = self._idle.popitem(last=False)
            closed = self._databases.pop(oldest)
            self._closing[oldest] = asyncio.get_running_loop().create_task(
                self._close(oldest, closed.journal), name="close a run journal"
            )

    async def _close(self, uri: str, journal: SqlRunJournal) -> None:
        try:
            await journal.close()
        except Exception:  # its appends' errors went to their callers
            logger.warning("closing the journal of %s failed", parse_store_uri(uri).uri)
        finally:
            del self._closing[uri]

    async def events(self, run_id: str, store_uri: str) -> list[JournalEvent] | None:
        """Every event of the run's journal, or ``None`` when it keeps none.

        Raises:
            DataLoss: the journal has a damaged line or row (reason ``JOURNAL_CORRUPT``).
        """
        journal = await self.reader(run_id, store_uri)
        if journal is None:
            return None
        try:
            return await read_run(journal, run_id, 1)
        except (JournalCorruptError, CorruptStoreError) as exc:
            raise DataLoss("JOURNAL_CORRUPT", f"run {run_id!r}: {exc}") from None
        finally:
            await self.release(journal)

    @contextlib.asynccontextmanager
    async def woken(
        self, run_id: str, store_uri: str, wake: Callable[[], None]
    ) -> AsyncIterator[bool]:
        """Call ``wake()`` whenever rows of ``run_id`` commit, while inside.

        Yields whether wake-ups are pushed (a PostgreSQL journal's notifications); ``False``:
        the caller must look again by itself now and then.
        """
        if parse_store_uri(store_uri).kind != "postgresql":
            yield False
            return
        listener = await self._listener(store_uri)
        if listener is None:
            yield False
            return
        listener.waiters.setdefault(run_id, set()).add(wake)
        try:
            yield True
        finally:
            waiters = listener.waiters.get(run_id, set())
            waiters.discard(wake)
            if not waiters:
                listener.waiters.pop(run_id, None)

    async def _listener(self, store_uri: str) -> _Listener | None:
        if parse_store_uri(store_uri).kind != "postgresql":
            return None
        journal = await self.database(store_uri)
        # Kept open while the sidecar runs: its notifications wake every reader of the
        # database (an operator's --allow-store list bounds the PostgreSQL databases).
        self._databases[store_uri].kept = True
        await self.release(journal)
        if not isinstance(journal, PostgresRunJournal):
            return None
        async with self._lock:
            listener = self._listeners.get(store_uri)
            if listener is not None:
                return listener
            listener = _Listener()
            try:
                listener.stop = await journal.listen(listener.notified)
            except StoreError as exc:
                where = parse_store_uri(store_uri).uri  # its password masked
                logger.warning("journal notifications of %s unavailable: %s", where, exc)
                return None
            self._listeners[store_uri] = listener
            return listener

    async def remove(self, run_id: str, store_uri: str) -> bool:
        """Remove the run's journal (its file, or its rows); whether there was one.

        Raises:
            JournalFileError: the file exists and could not be removed.
            StoreError: the database failed; nothing was removed.
        """
        if parse_store_uri(store_uri).kind in DATABASE_STORE_KINDS:
            journal = await self.database(store_uri)
            try:
                return await journal.delete_run(run_id) > 0
            finally:
                await self.release(journal)
        path = self.path_of(run_id, store_uri)
        if path is None:
            return False
        try:
            await asyncio.to_thread(os.unlink, path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise JournalFileError("JOURNAL_REMOVE_FAILED", path, "remove", exc) from None
        return True

    async def aclose(self) -> None:
        """Stop the notifications and close the database journals (at the sidecar's stop)."""
        listeners, self._listeners = self._listeners, {}
        for listener in listeners.values():
            if listener.stop is not None:
                await listener.stop()
        while self._closing:
            await asyncio.wait(list(self._closing.values()))
        databases, self._databases = self._databases, {}
        self._idle.clear()
        for shared in databases.values():
            await shared.journal.close()


class _Listener:
    """One PostgreSQL journal's notifications, dispatched to the readers of each run."""

    def __init__(self) -> None:
        self.waiters: dict[str, set[Callable[[], None]]] = {}
        self.stop: Callable[[], Awaitable[None]] | None = None

    def notified(self, run_id: str) -> None:
        for wake in tuple(self.waiters.get(run_id, ())):
            wake()


def journal_options(journal: RunJournal | None) -> JournalOptions | None:
    """The journal options of an attempt: journal-first (D10), or ``None`` for no journal."""
    return JournalOptions(journal, durable=True) if journal is not None else None


def _create_private(path: str) -> None:
    """Create the journal directory (0700) and file (0600) before the journal opens it.

    ``JsonlRunJournal`` creates a missing file world-readable; one created here first keeps
    the mode it is given. A file from before is narrowed to 0600 too.
    """
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def inside_journal_directory(path: str) -> bool:
    """Whether ``path`` lies in a journal directory (no store may be kept there)."""
    return os.path.basename(os.path.dirname(path)).endswith(JOURNALS_SUFFIX)

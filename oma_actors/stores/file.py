"""FileStore: the whole store in one JSON file, rewritten atomically on every mutation (spec FS).

Reads are served from an in-memory mirror loaded once. Writes go through a chain of flush tasks
owned by the store: each flush waits for the one before it, so renames land in the order the
mutations happened, and a caller that is cancelled cannot stop a flush half-way (the worker
thread doing the rename cannot be stopped; if the chain moved on, an older snapshot could be
renamed over a newer one).

One file, one instance, one writer (item 4 of issue 24, DESIGN D13): ``FileStore(path)`` returns
the instance this process already has for that file (any spelling), because compare-and-set is
atomic only within an instance and two mirrors of one file would each rewrite it without the
other's writes. The first write takes the file's ``flock`` (``file_lock``), so a second process
writing the same file is refused instead of erasing what this one wrote; after taking it the
mirror is read again, since another process may have written between our read and our lock.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.errors import StoreError, StoreLimitError
from oma_actors.stores import file_io
from oma_actors.stores.conditional import AppliesConditionally
from oma_actors.stores.entries import checks_hold, commit, make_entry, plan_writes
from oma_actors.stores.file_format import check_encodable, decode_store, encode_store
from oma_actors.stores.file_io import file_stamp, read_state, sweep_stale_temps, write_atomic
from oma_actors.stores.file_lock import hold_state_file
from oma_actors.stores.prefix import matching

if TYPE_CHECKING:
    import builtins
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
    from datetime import datetime
    from types import TracebackType

    from oma_actors.clock import Clock
    from oma_actors.stores.base import Expect, MemoryEntry, Write

_T = TypeVar("_T")

# The live FileStore of each (class, real path) in this process: what makes FileStore(path) one
# instance per file. Weak, so a store nobody uses is collected and its lock given back.
_INSTANCES: weakref.WeakValueDictionary[tuple[type[FileStore], str], FileStore] = (
    weakref.WeakValueDictionary()
)


class FileStore(AppliesConditionally):
    """A store kept in one JSON file in OMA's format, written by one process at a time.

    The file is ``{"version":1,"entries":[...]}``, readable by the TypeScript OMA and vice versa. A
    missing file is an empty store and is created by the first mutation. A corrupt or unreadable
    file raises ``CorruptStoreError`` on first use, and keeps raising it on this instance.

    ``apply`` and ``compare_and_set`` are atomic among callers sharing this instance (FS-11),
    and every ``FileStore`` of one file in a process IS one instance: while one is alive,
    ``FileStore(path)`` under any spelling of that file returns it (keeping its first clock).
    The first write locks the file against other processes (D13): a second process writing it
    gets a ``StoreError`` naming this one's pid, and ``aclose()`` (or the instance being
    garbage-collected) gives the lock back. Reading takes no lock, so ``oma approvals list``
    works beside a live app. ``async with FileStore.open(path) as store`` also loads eagerly,
    locks at once and waits for pending writes on exit. Every write rewrites the whole file,
    so it suits the checkpoint store; keep chatty shared memory on ``InMemoryStore`` (FS-12).

    Args:
        path: The state file; resolved to its real absolute path now, so a later ``chdir`` is
            harmless.
        clock: Stamps ``created_at`` of new keys (trimmed to the file's milliseconds); ignored
            when this process already has an instance of the file.
    """

    _path: str

    one_document = True
    """Every entry lives in one file that each load and write handles whole
    (``stores.base.one_document``)."""

    def __new__(cls, path: str | os.PathLike[str], *, clock: Clock = SYSTEM_CLOCK) -> FileStore:
        """The live instance of this file in this process, or a new one."""
        real = os.path.realpath(os.fspath(path))
        existing = _INSTANCES.get((cls, real))
        if existing is not None:
            return existing
        store = super().__new__(cls)
        store._path = real
        _INSTANCES[(cls, real)] = store
        return store

    def __init__(self, path: str | os.PathLike[str], *, clock: Clock = SYSTEM_CLOCK) -> None:
        if hasattr(self, "_entries"):
            return  # the shared instance of this file: its state is already set up
        self._entries: dict[str, MemoryEntry] | None = None
        self._load_error: StoreError | None = None
        self._load_traceback: TracebackType | None = None
        self._load_lock = asyncio.Lock()
        self._clock = clock
        self._tail: asyncio.Task[Any] | None = None
        # Every mirror mutation bumps _generation; _durable is the newest generation on disk.
        # A flush that finds its generation already durable writes nothing (group commit).
        self._generation = 0
        self._durable = 0
        # This instance's claim on the file's flock, taken by the first write; the finalizer
        # gives it back on aclose() or when the instance is collected (never left locked).
        self._release: weakref.finalize[[], FileStore] | None = None
        # The file as the mirror last read it; an unlocked instance reads it again once it
        # changed (another process wrote it), a locked one is the file's only writer.
        self._stamp: tuple[int, int, int] | None = None
        # The mirror as last written (or loaded), and the refusal of a write over the read
        # limit: a refused flush puts the mirror back to what is on disk, and every flush of a
        # change it dropped (a generation up to _refused_through) fails with that refusal.
        self._durable_entries: dict[str, MemoryEntry] = {}
        # Changes reach the mirror in call order: getting the mirror may await (the file's
        # lock, a stat), and without a FIFO lock concurrent writers would resume, and so
        # change it, in any order, and the last write would not win.
        self._order = asyncio.Lock()
        self._refused: StoreLimitError | None = None
        self._refused_through = 0

    @classmethod
    @asynccontextmanager
    async def open(
        cls, path: str | os.PathLike[str], *, clock: Clock = SYSTEM_CLOCK
    ) -> AsyncIterator[FileStore]:
        """Open the store at ``path``, locked and loaded; wait for its pending writes on exit.

        While it is open, this process holds an advisory lock on ``<path>.lock`` (DESIGN D13),
        so another process opening the same file (under any spelling) is refused instead of
        silently overwriting this one's writes. Other opens in this process share the lock;
        A ``FileStore(path)`` built directly takes the same lock at its first write.

        Raises:
            StoreError: Another process has the file open.
            CorruptStoreError: The file exists but is unreadable or not a valid state file.
        """
        store = cls(path, clock=clock)
        # A counted claim for this context (another open context of the same instance may
        # close first), besides the one the store's writes take.
        hold = await hold_state_file(store.path)
        try:
            await store._writable()
            yield store
        finally:
            try:
                await store.aclose()
            finally:
                hold.release()

    @property
    def path(self) -> str:
        """The absolute path of the state file."""
        return self._path

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key``, or ``None`` when there is none."""
        return (await self._mirror()).get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Insert or replace ``key`` and write the file before returning.

        The mirror changes first (FS-08): if the write fails, the caller gets the error while
        later reads, and the next successful write, include the new value.

        Raises:
            StoreError: The metadata is not JSON-serializable (then nothing changed), or the
                write failed.
            StoreLimitError: The file would grow over ``MAX_STATE_BYTES``, the most the
                store reads back: nothing was written, and the mirror is back to the file's
                content (changes of other callers in the same write are refused with it).
            CorruptStoreError: The file could not be loaded.
        """
        await self._put(key, value, metadata, None)

    async def set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Like ``set``, also recording ``expires_at_turn`` (filtering is the caller's job)."""
        await self._put(key, value, metadata, expires_at_turn)

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        """Apply ``writes`` only if every check holds, with one atomic rewrite of the file.

        Runs inside the write chain (FS-09): it waits for earlier writes, compares against the
        mirror, changes the mirror, and returns only after one rename put every write on disk.
        When the checks hold but the writes change nothing, it still waits until the state it
        compared against is durable.

        A failed write is reported like a failed ``set`` (FS-08): the mirror keeps the new
        entries, so later reads and the next successful write include them.

        Returns:
            ``True`` if every check held and the writes are on disk, ``False`` on a mismatch
            (nothing changed, the file is not touched).

        Raises:
            StoreError: A ``Put``'s metadata is not JSON-serializable (then nothing changed),
                or the write failed.
            StoreLimitError: The file would grow over ``MAX_STATE_BYTES`` (as for ``set``).
        """

        async def attempt() -> bool:
            entries = await self._mirror()
            # No await from the check to the commit: the chain orders writers of this instance,
            # but set() and delete() change the mirror outside it.
            if not checks_hold(entries, checks):
                return False
            changes = plan_writes(entries, writes, now=self._now())
            for _, entry in changes:
                if entry is not None:
                    check_encodable(entry)  # before the mirror changes: all or nothing
            if changes:
                commit(entries, changes)
                self._generation += 1
            await self._write_through(self._generation)
            return True

        async with self._order:
            await self._writable()
            task = self._chained(attempt)
        return await asyncio.shield(task)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return every entry in insertion order; with ``prefix``, only keys that start with it."""
        return matching((await self._mirror()).values(), prefix)

    async def delete(self, key: str) -> None:
        """Remove ``key`` and write the file; a missing key writes nothing (FS-10)."""
        async with self._order:
            entries = await self._writable()
            if entries.pop(key, None) is None:
                return
            self._generation += 1
            generation = self._generation
        await self._flush_through(generation)

    async def clear(self) -> None:
        """Remove every entry and write the (empty) file, even if it was already empty."""
        async with self._order:
            entries = await self._writable()
            entries.clear()
            self._generation += 1
            generation = self._generation
        await self._flush_through(generation)

    async def flush(self) -> None:
        """Make everything in the mirror durable, retrying the write if an earlier one failed.

        Raises:
            StoreError: The write failed.
        """
        await self._writable()
        await self._flush_through(self._generation)

    async def aclose(self) -> None:
        """Wait for pending writes, then give back the file's lock if a write took it.

        The pending writes' errors belong to their own callers and are not raised. The store
        stays usable: its next use reads the file again and its next write locks it again.
        """
        tail = self._tail
        if tail is not None and not tail.done():
            await asyncio.wait([tail])
        release, self._release = self._release, None
        if release is not None:
            release()
        if self._durable == self._generation and self._load_error is None:
            # Unlocked now, another process may write the file: the next use reads it again.
            self._entries = None

    async def _stale(self) -> bool:
        """Whether this unlocked instance's mirror is older than the file (then it is dropped).

        Only a reader asks: while this process holds the lock nobody else writes the file, and
        a mirror with changes not yet on disk is this process's newest state (FS-08).
        """
        if self._release is not None or self._durable != self._generation:
            return False
        if self._load_error is not None:
            return False
        stamp = await file_stamp(self._path)
        # Checked again after the await: a write of this process may have begun meanwhile.
        if stamp == self._stamp or self._release is not None or self._durable != self._generation:
            return False
        self._entries = None
        return True

    async def _writable(self) -> dict[str, MemoryEntry]:
        """The mirror, once this process holds the file's lock (refused if another does)."""
        if self._release is None:
            await self._mirror()  # a file that cannot be loaded is refused before locking it
            async with self._load_lock:
                if self._release is None:
                    hold = await hold_state_file(self._path)
                    try:
                        await self._read_again()
                    except BaseException:
                        hold.release()
                        raise
                    self._release = weakref.finalize(self, hold.release)
        return await self._mirror()

    async def _read_again(self) -> None:
        """Read the file again if it changed since the mirror read it; called just after the
        lock was taken, so no other process writes it from here on.

        Another process may have written between our read and our lock (``oma approvals
        decide`` beside an app that had only read): writing our older mirror would erase that.
        A mirror with changes not yet on disk (a failed write) is kept: it is this process's
        newest state, and FS-08 promises the next write includes it.
        """
        if self._entries is None or self._durable != self._generation:
            return
        stamp = await file_stamp(self._path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        data = await read_state(self._path)
        self._entries = {} if data is None else decode_store(self._path, data)

    async def _mirror(self) -> dict[str, MemoryEntry]:
        if self._entries is not None and not await self._stale():
            return self._entries
        async with self._load_lock:
            if self._load_error is not None:
                # FS-05: a failed load is final for this instance; no silent retry into "empty".
                # Reset to the original traceback so repeated raises do not keep growing it.
                raise self._load_error.with_traceback(self._load_traceback)
            if self._entries is None:
                try:
                    await sweep_stale_temps(self._path)
                    self._stamp = await file_stamp(self._path)  # before the read: never newer
                    data = await read_state(self._path)
                    self._entries = {} if data is None else decode_store(self._path, data)
                    self._durable_entries = dict(self._entries)
                except StoreError as exc:
                    self._load_error, self._load_traceback = exc, exc.__traceback__
                    # Final for this instance, but the next FileStore(path) reads the file again.
                    if _INSTANCES.get((type(self), self._path)) is self:
                        del _INSTANCES[(type(self), self._path)]
                    raise
            return self._entries

    async def _put(
        self,
        key: str,
        value: str,
        metadata: Mapping[str, Any] | None,
        expires_at_turn: int | None,
    ) -> None:
        async with self._order:
            await self._change(key, value, metadata, expires_at_turn)
            generation = self._generation
        await self._flush_through(generation)

    async def _change(
        self,
        key: str,
        value: str,
        metadata: Mapping[str, Any] | None,
        expires_at_turn: int | None,
    ) -> None:
        entries = await self._writable()
        entry = make_entry(
            entries.get(key),
            key,
            value,
            metadata,
            now=self._now(),
            expires_at_turn=expires_at_turn,
        )
        check_encodable(entry)  # before the mirror changes, or every later flush would fail
        entries[key] = entry
        self._generation += 1

    def _now(self) -> datetime:
        # The file keeps milliseconds (toISOString); trimming now makes the mirror equal a reload.
        now = self._clock.now()
        return now.replace(microsecond=now.microsecond // 1000 * 1000)

    async def _flush_through(self, generation: int) -> None:
        await self._in_chain(lambda: self._write_through(generation))

    async def _write_through(self, generation: int) -> None:
        # Runs only inside the chain, so flushes never overlap and _durable only grows.
        if self._durable >= generation or self._entries is None:
            return  # an earlier flush already wrote a mirror that contained this change
        if generation <= self._refused_through and self._refused is not None:
            # The refused flush dropped this change from the mirror. A new error each time:
            # one instance raised by many callers would chain every raise into its traceback.
            refused = self._refused
            raise StoreLimitError(refused.path, refused.size, refused.limit)
        target = self._generation
        data = encode_store(self._entries.values())
        limit = file_io.MAX_STATE_BYTES  # looked up now, like read_state's default
        if len(data) > limit:
            # A file the store could write but not read back would leave it (and a sidecar
            # booting on it) unopenable: one limit bounds both. Retrying cannot help, so unlike
            # a failed write (FS-08) the mirror does not keep the changes.
            self._refused = StoreLimitError(self._path, len(data), limit)
            self._refused_through = target
            self._entries.clear()
            self._entries.update(self._durable_entries)
            raise StoreLimitError(self._path, len(data), limit)
        written = dict(self._entries)  # before the await: the mirror may change meanwhile
        await write_atomic(self._path, data)
        self._durable = target
        self._durable_entries = written

    async def _in_chain(self, step: Callable[[], Awaitable[_T]]) -> _T:
        # shield: cancelling the caller must not cancel the write (see the module docstring).
        # shield also marks the task's exception as retrieved if the caller has gone.
        return await asyncio.shield(self._chained(step))

    def _chained(self, step: Callable[[], Awaitable[_T]]) -> asyncio.Task[_T]:
        task = asyncio.get_running_loop().create_task(_after(self._tail, step))
        self._tail = task  # owned by the store: the next link and aclose() wait for it
        return task


async def _after(previous: asyncio.Task[Any] | None, step: Callable[[], Awaitable[_T]]) -> _T:
    if previous is not None and not previous.done():
        await asyncio.wait([previous])  # ordering only: its error belongs to its own caller
    return await step()

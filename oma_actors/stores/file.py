"""FileStore: the whole store in one JSON file, rewritten atomically on every mutation (spec FS).

Reads are served from an in-memory mirror loaded once. Writes go through a chain of flush tasks
owned by the store: each flush waits for the one before it, so renames land in the order the
mutations happened, and a caller that is cancelled cannot stop a flush half-way (the worker
thread doing the rename cannot be stopped; if the chain moved on, an older snapshot could be
renamed over a newer one).
"""

from __future__ import annotations

import asyncio
import builtins
import os
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.errors import StoreError, StoreLimitError
from oma_actors.stores import file_io
from oma_actors.stores.conditional import AppliesConditionally
from oma_actors.stores.entries import checks_hold, commit, make_entry, plan_writes
from oma_actors.stores.file_format import check_encodable, decode_store, encode_store
from oma_actors.stores.file_io import read_state, sweep_stale_temps, write_atomic
from oma_actors.stores.file_lock import hold_state_file

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
    from datetime import datetime
    from types import TracebackType

    from oma_actors.clock import Clock
    from oma_actors.stores.base import Expect, MemoryEntry, Write

_T = TypeVar("_T")


class FileStore(AppliesConditionally):
    """A store kept in one JSON file in OMA's format, for one process at a time.

    The file is ``{"version":1,"entries":[...]}``, readable by the TypeScript OMA and vice versa. A
    missing file is an empty store and is created by the first mutation. A corrupt or unreadable
    file raises ``CorruptStoreError`` on first use, and keeps raising it on this instance.

    ``apply`` and ``compare_and_set`` are atomic only among callers sharing this instance
    (FS-11). Prefer ``open_store("file:///abs/state.json")``, which gives every spelling of one
    file one shared instance, or ``async with FileStore.open(path) as store``; both load eagerly,
    wait for pending writes on exit, and lock the file against other processes (D13). Every
    write rewrites the whole file, so it suits the checkpoint store; keep chatty shared memory
    on ``InMemoryStore`` (FS-12).

    Args:
        path: The state file; resolved to an absolute path now, so a later ``chdir`` is harmless.
        clock: Stamps ``created_at`` of new keys (trimmed to the file's milliseconds).
    """

    def __init__(self, path: str | os.PathLike[str], *, clock: Clock = SYSTEM_CLOCK) -> None:
        raw = os.fspath(path)
        # abspath reads the working directory (a syscall); an absolute path needs only normpath.
        self._path = os.path.normpath(raw) if os.path.isabs(raw) else os.path.abspath(raw)
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
        # The mirror as last written (or loaded), and the refusal of a write over the read
        # limit: a refused flush puts the mirror back to what is on disk, and every flush of a
        # change it dropped (a generation up to _refused_through) fails with that refusal.
        self._durable_entries: dict[str, MemoryEntry] = {}
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
        ``open_store`` also shares the instance, which is what keeps compare-and-set atomic.
        A ``FileStore(path)`` built directly takes no lock.

        Raises:
            StoreError: Another process has the file open.
            CorruptStoreError: The file exists but is unreadable or not a valid state file.
        """
        store = cls(path, clock=clock)
        hold = await hold_state_file(store.path)
        try:
            await store._mirror()
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
        await self._mirror()

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

        return await self._in_chain(attempt)

    async def list(self) -> builtins.list[MemoryEntry]:
        """Return every entry in insertion order."""
        return builtins.list((await self._mirror()).values())

    async def delete(self, key: str) -> None:
        """Remove ``key`` and write the file; a missing key writes nothing (FS-10)."""
        entries = await self._mirror()
        if entries.pop(key, None) is not None:
            self._generation += 1
            await self._flush_through(self._generation)

    async def clear(self) -> None:
        """Remove every entry and write the (empty) file, even if it was already empty."""
        entries = await self._mirror()
        entries.clear()
        self._generation += 1
        await self._flush_through(self._generation)

    async def flush(self) -> None:
        """Make everything in the mirror durable, retrying the write if an earlier one failed.

        Raises:
            StoreError: The write failed.
        """
        await self._mirror()
        await self._flush_through(self._generation)

    async def aclose(self) -> None:
        """Wait for pending writes. Their errors belong to their own callers and are not raised."""
        tail = self._tail
        if tail is not None and not tail.done():
            await asyncio.wait([tail])

    async def _mirror(self) -> dict[str, MemoryEntry]:
        if self._entries is not None:
            return self._entries
        async with self._load_lock:
            if self._load_error is not None:
                # FS-05: a failed load is final for this instance; no silent retry into "empty".
                # Reset to the original traceback so repeated raises do not keep growing it.
                raise self._load_error.with_traceback(self._load_traceback)
            if self._entries is None:
                try:
                    await sweep_stale_temps(self._path)
                    data = await read_state(self._path)
                    self._entries = {} if data is None else decode_store(self._path, data)
                    self._durable_entries = dict(self._entries)
                except StoreError as exc:
                    self._load_error, self._load_traceback = exc, exc.__traceback__
                    raise
            return self._entries

    async def _put(
        self,
        key: str,
        value: str,
        metadata: Mapping[str, Any] | None,
        expires_at_turn: int | None,
    ) -> None:
        entries = await self._mirror()
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
        await self._flush_through(self._generation)

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
            raise self._refused  # the refused flush dropped this change from the mirror
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
            raise self._refused
        written = dict(self._entries)  # before the await: the mirror may change meanwhile
        await write_atomic(self._path, data)
        self._durable = target
        self._durable_entries = written

    async def _in_chain(self, step: Callable[[], Awaitable[_T]]) -> _T:
        task = asyncio.get_running_loop().create_task(_after(self._tail, step))
        self._tail = task  # owned by the store: the next link and aclose() wait for it
        # shield: cancelling the caller must not cancel the write (see the module docstring).
        # shield also marks the task's exception as retrieved if the caller has gone.
        return await asyncio.shield(task)


async def _after(previous: asyncio.Task[Any] | None, step: Callable[[], Awaitable[_T]]) -> _T:
    if previous is not None and not previous.done():
        await asyncio.wait([previous])  # ordering only: its error belongs to its own caller
    return await step()

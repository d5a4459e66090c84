"""``JsonlMarkFile``: a JSONL journal's dispatch marks, in ``<journal>.marks`` beside it.

One line per mark, appended on an ``O_APPEND`` descriptor and fsynced; the file's directory is
fsynced once when the file is created, so a mark that returned survives a crash. Marks of
concurrent runs share a write and an fsync (``GroupCommit``, no window: an unsafe call waits on
its mark). Read as the journal is: a torn trailing line counts as not written; any other bad
line raises ``JournalCorruptError`` (a restore must not read past a mark it cannot read).
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

import orjson

from oma_actors.errors import StoreError
from oma_actors.journal.batching import GroupCommit
from oma_actors.journal.errors import JournalCorruptError
from oma_actors.journal.marks import DispatchMark, mark_from_json
from oma_actors.stores.file_io import append_synced, open_for_append, read_regular
from oma_actors.stores.io_thread import IoThread

if TYPE_CHECKING:
    from collections.abc import Sequence

MAX_MARKS_BYTES = 64 << 20
"""The largest marks file a read takes (64 MiB: about 600,000 marks)."""


def marks_path(journal_path: str) -> str:
    """Where the marks of the JSONL journal at ``journal_path`` live."""
    return f"{journal_path}.marks"


class JsonlMarkFile:
    """The dispatch marks of one JSONL journal (``DispatchMarks``); see the module docstring."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._fd: int | None = None
        self._group: GroupCommit[DispatchMark, bool] = GroupCommit(self._commit, window_s=0)
        self._thread = IoThread(f"oma-marks:{os.path.basename(path)}")

    @property
    def path(self) -> str:
        """The marks file."""
        return self._path

    async def mark(self, mark: DispatchMark) -> None:
        """Append ``mark``; returns once it is fsynced.

        Raises:
            StoreError: the write or the fsync failed (what landed of it was cut off again).
        """
        await self._group.submit(mark, now=True)

    async def marks_of(self, run_id: str, above: int = 0) -> list[DispatchMark]:
        """The marks of ``run_id`` with ``seq > above``, in seq order.

        Raises:
            JournalCorruptError: a line other than a torn trailing one is unreadable.
            CorruptStoreError: the path is not a regular file, or is over ``MAX_MARKS_BYTES``.
            StoreError: the file cannot be read.
        """
        return await asyncio.to_thread(self._read, run_id, above)

    async def close(self) -> None:
        """Wait for every pending mark, then close the file and end the file's thread."""
        try:
            await self._group.drain()
            if self._fd is not None:
                fd, self._fd = self._fd, None
                await self._thread.submit(os.close, fd)
        finally:
            await self._thread.close()

    async def _commit(self, marks: Sequence[DispatchMark]) -> list[bool]:
        data = b"".join(mark.to_json() + b"\n" for mark in marks)
        await self._thread.submit(self._write, data)
        return [True] * len(marks)

    def _write(self, data: bytes) -> None:
        try:
            if self._fd is None:
                self._fd = open_for_append(self._path, what="dispatch marks", sync_new_name=True)
            append_synced(self._fd, data)
        except OSError as exc:
            raise StoreError(f"{self._path}: dispatch mark failed: {exc}") from exc

    def _read(self, run_id: str, above: int) -> list[DispatchMark]:
        try:
            raw = read_regular(self._path, MAX_MARKS_BYTES, what="dispatch marks")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"{self._path}: dispatch marks read failed: {exc}") from exc
        lines = raw.split(b"\n")
        last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
        # Another run's line is skipped unparsed (a shared journal's marks file holds many).
        needle = b'"runId":' + orjson.dumps(run_id)
        found: list[DispatchMark] = []
        for index, line in enumerate(lines):
            if not line.strip() or (needle not in line and index != last):
                continue
            try:
                mark = mark_from_json(line)
            except ValueError as exc:
                if index == last:
                    break  # a torn trailing line: not written
                raise JournalCorruptError(self._path, index + 1, "json", str(exc)) from None
            if mark.run_id == run_id and mark.seq > above:
                found.append(mark)
        found.sort(key=lambda mark: mark.seq)
        return found


__all__ = ["MAX_MARKS_BYTES", "JsonlMarkFile", "marks_path"]

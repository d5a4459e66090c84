"""FileStore on disk: atomic whole-file replace, reading, stale temp cleanup (FS-06, D5).

Every call goes through aiofiles or a worker thread, so none of it blocks the event loop.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import re
import stat
from contextlib import suppress

import aiofiles
import aiofiles.os

from oma_actors.errors import CorruptStoreError, StoreError

# Temp names are `<path>.tmp-<pid>-<counter>` with one counter per process, so no two writers in
# this process (even two FileStore instances on one path) ever share a temp file: a shared fixed
# name lets one save rename away the other's file mid-write.
_temp_counter = itertools.count(1)
# Temp files this process is writing right now. A temp carrying our own pid that is not in here
# was left by an earlier process that had the same pid (typical for pid 1 in a container).
_writing: set[str] = set()


MAX_STATE_BYTES = 256 << 20
"""The largest state file ``read_state`` reads (256 MiB): a larger one is refused, not read."""


async def read_state(path: str, *, limit: int | None = None) -> bytes | None:
    """Return the file's bytes, or ``None`` if it does not exist (a fresh store).

    Only a regular file is read, and at most ``limit`` bytes of it (default
    ``MAX_STATE_BYTES``): a device (``/dev/zero``), a FIFO or a directory named as a state
    file would otherwise be read until memory runs out, or block forever.

    Raises:
        CorruptStoreError: The file exists but is not a regular file, is larger than
            ``limit``, or cannot be read (permissions, ...). Treating it as empty would let the
            next write destroy what is there.
    """
    try:
        return await asyncio.to_thread(_read_regular, path, limit or MAX_STATE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptStoreError(
            path, f"state file is unreadable ({exc.strerror or exc}); refusing to start fresh"
        ) from exc


def _read_regular(path: str, limit: int) -> bytes:
    return read_regular(path, limit, what="state file")


def read_regular(path: str, limit: int, *, what: str) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (blocking: a thread's).

    Shared by every reader of a file a user names (a store's state file, a run journal): a
    device (``/dev/zero``, ``/proc/kmsg``), a FIFO or a directory is refused before any read,
    and a file over ``limit`` is refused rather than read into memory.

    Raises:
        FileNotFoundError: there is no such file (the caller decides what that means).
        CorruptStoreError: it is not a regular file, or is (or grew) over ``limit`` bytes;
            ``what`` names it in the message.
        OSError: it cannot be opened or read.
    """
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. fstat on the
    # opened descriptor, not stat on the name, so the file checked is the file read.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        check_regular(fd, path, limit, what=what)
        chunks: list[bytes] = []
        size = 0
        while True:  # read to the end, but never past the limit (the file may be growing)
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise CorruptStoreError(path, f"{what} grew over the {limit}-byte limit")
    finally:
        os.close(fd)


def check_regular(fd: int, path: str, limit: int | None, *, what: str) -> None:
    """Refuse the open ``fd`` unless it is a regular file of at most ``limit`` bytes.

    Raises:
        CorruptStoreError: it is not a regular file, or is over ``limit`` bytes.
    """
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise CorruptStoreError(
            path, f"not a regular file ({_kind(info.st_mode)}); refusing to read it as a {what}"
        )
    if limit is not None and info.st_size > limit:
        raise CorruptStoreError(
            path, f"{what} is {info.st_size} bytes, over the {limit}-byte limit"
        )


class UncutAppendError(OSError):
    """An append failed and cutting the file back to where it began failed too."""


def open_for_append(path: str, *, what: str, sync_new_name: bool = False) -> int:
    """An ``O_APPEND`` descriptor on ``path`` (created ``0o600``), refused unless a regular file.

    ``O_NONBLOCK`` so a FIFO cannot hang the open; checked on the descriptor before a byte is
    read or written. ``sync_new_name``: a file this call creates, or finds empty, has its
    directory fsynced (``sync_directory``), so its name (and what is appended to it) survives a
    crash.

    Raises:
        CorruptStoreError: ``path`` is not a regular file.
        OSError: the open or the directory's fsync failed (the descriptor is closed).
    """
    created = sync_new_name and not os.path.lexists(path)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
    try:
        check_regular(fd, path, None, what=what)
        # An empty file counts as new too: a creation whose folder fsync failed (or that
        # crashed before it) left one whose name may not be durable, and nothing has been
        # appended to it since; its first append syncs the name first, as a creation does.
        if sync_new_name and (created or os.fstat(fd).st_size == 0):
            sync_directory(os.path.dirname(path) or ".")
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_directories(directory: str, *, strict: bool) -> None:
    """``os.makedirs(directory, exist_ok=True)``, each directory it creates made durable in
    its parent (the parent fsynced), so a file's name is not left under a directory whose own
    name a crash may lose.

    ``strict``: a failed fsync raises (``sync_directory``'s rules); otherwise it is skipped,
    as ``FileStore`` skips its folder fsync.

    Raises:
        OSError: a directory cannot be created, or (``strict``) synced.
    """
    created: list[str] = []
    here = directory
    while here and not os.path.isdir(here):
        created.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    os.makedirs(directory, exist_ok=True)
    for made in reversed(created):  # outermost first: each name lands in a durable parent
        if strict:
            sync_directory(os.path.dirname(made) or ".")
        else:
            with suppress(OSError):
                _fsync_directory(os.path.dirname(made) or ".")


_UNSUPPORTED = frozenset(
    {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EACCES, errno.EISDIR}
)
"""What a filesystem or platform answers when it cannot fsync a directory at all."""


def sync_directory(directory: str) -> None:
    """fsync ``directory``, so the names in it are durable; a filesystem that cannot fsync a
    directory at all (``_UNSUPPORTED``) is let be, as ``FileStore`` lets it be.

    Raises:
        OSError: the fsync failed otherwise (``EIO``, ``ENOSPC``, ...): the caller's write
            must fail, and its next attempt syncs again.
    """
    try:
        _fsync_directory(directory)
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise


def append_synced(fd: int, data: bytes) -> None:
    """Append all of ``data`` to ``fd`` and fsync it; a failed append leaves no part of it.

    Whatever part of ``data`` landed before a failure is cut off again, so no torn line sits
    before the next append.

    Raises:
        UncutAppendError: the append failed and so did the cut (part of ``data`` may remain).
        OSError: the append failed (the file is as it was).
    """
    start = os.lseek(fd, 0, os.SEEK_END)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, start)
        except OSError as cut:
            raise UncutAppendError(exc.errno, f"{exc}; cutting it off failed: {cut}") from exc
        raise


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


# Directories this process has already created: makedirs is one thread round trip per write
# otherwise. A directory removed later makes the open fail, which surfaces as a StoreError.
_made_dirs: set[str] = set()


async def file_stamp(path: str) -> tuple[int, int, int] | None:
    """The state file's identity and version: (inode, size, mtime in ns); ``None`` if missing.

    Every write replaces the file by a rename, so a write by anyone changes the inode.
    """
    try:
        found = await aiofiles.os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"{path}: cannot stat the state file ({exc})") from exc
    return found.st_ino, found.st_size, found.st_mtime_ns


async def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file.

    The whole replace (temp file, write, fsync, rename, directory fsync) is one blocking call
    on a worker thread (``aiofiles.os.wrap``): one hop off the loop, where a call per step
    made six (about 90 us each, a sixth of a small FileStore save).

    Raises:
        StoreError: Any step up to and including the rename failed; the temp file is gone and
            ``path`` still holds the previous revision.
    """
    temp = f"{path}.tmp-{os.getpid()}-{next(_temp_counter)}"
    # Registered on the loop's side before the thread starts, so a sweep in this process never
    # takes it for a dead writer's; the thread drops it once the temp is renamed or removed.
    _writing.add(temp)
    try:
        await _replace_in_thread(path, temp, data)
    except OSError as exc:
        raise StoreError(f"{path}: cannot write state file ({exc})") from exc


def _replace_sync(path: str, temp: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    try:
        if directory not in _made_dirs:
            make_directories(directory, strict=False)
            _made_dirs.add(directory)
        # 0600: a state file holds conversations and tool results; like the sidecar's token
        # file, only its owner may read it (the rename keeps the temp file's mode).
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            remaining = memoryview(data)
            while remaining:  # a write may be short (a signal, a nearly full disk)
                remaining = remaining[os.write(fd, remaining) :]
            # fsync before the rename: otherwise, after a power cut, the rename can be on disk
            # while the data is not, leaving an empty or partial file under the real name.
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        # Never leave an orphan temp behind (a failed step, or an interrupt in this thread).
        with suppress(OSError):
            os.unlink(temp)
        raise
    finally:
        _writing.discard(temp)
    # The rename is only durable once the directory entry is; some filesystems and platforms
    # refuse to fsync a directory, and the write has already succeeded, so this is best-effort.
    with suppress(OSError):
        _fsync_directory(directory)


_replace_in_thread = aiofiles.os.wrap(_replace_sync)


async def sweep_stale_temps(path: str) -> None:
    """Remove temp files of ``path`` left by writers that no longer run (DESIGN D5).

    Only names of the exact form ``<name>.tmp-<pid>-<counter>`` next to ``path`` are considered,
    and only when no live process (and no writer in this process) can still own them. Errors are
    ignored: this is housekeeping, and an orphan temp is never read.
    """
    if os.name != "posix":
        return  # os.kill(pid, 0) terminates the process on Windows instead of probing it
    directory, name = os.path.split(path)
    prefix = f"{name}.tmp-"
    pattern = re.compile(re.escape(prefix) + r"(\d+)-\d+")
    try:
        names = await aiofiles.os.listdir(directory)
    except OSError:
        return
    for candidate in names:
        # A directory of many stores' files (a run per file) lists thousands of names for each
        # store that opens: a prefix test first, the pattern only for that store's temps.
        match = pattern.fullmatch(candidate) if candidate.startswith(prefix) else None
        if match is None:
            continue
        temp = os.path.join(directory, candidate)
        if temp in _writing or _pid_alive(int(match.group(1))):
            continue
        with suppress(OSError):
            await aiofiles.os.unlink(temp)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # our own pid but not in _writing: a previous process with the same pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):
        return True  # e.g. another user's live process, or not a pid at all: keep the file
    return True


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

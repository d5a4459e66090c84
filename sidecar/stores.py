"""Checkpoint stores named by URI: every ``open_store`` URI (``memory://``, ``file:///``,
``sqlite:///``, ``postgresql://``, ``redis://``), for ``--store`` and a run's ``store_uri``.

One store instance per URI for the life of the server: a ``FileStore``'s compare-and-set and
its write ordering hold only among callers sharing one instance, so every run (and the run
registry) naming the same file must share it, and one ``memory://name`` is one store for every
run that names it. Every spelling of one file normalizes to one URI (DESIGN D13).

A store URI in a request comes from a token holder, not from the operator, so before it is
opened :func:`check_request_store` confines file and SQLite stores to the operator's store roots
(``--store-root``, by default the directory of ``--store``) and refuses anything that is not a
regular file: a token holder must not create files anywhere the sidecar can write, nor make it
read ``/dev/zero``. A PostgreSQL or Redis store names a server the sidecar connects to, so it
must match one of the operator's allow-list patterns (``--allow-store``; by default only
``--store`` itself): otherwise a token holder could make the sidecar create tables in another
database of a shared server, or talk to a hostile server of its choosing.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import stat
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import grpc

from oma_actors import ConfigurationError, open_store
from oma_actors.stores import AtomicStore, EncryptingStore, parse_store_uri
from sidecar.journals import inside_journal_directory
from sidecar.status import InvalidArgument, SidecarError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from oma_actors.stores import KeyRing, MemoryStore

# What GetServerInfo advertises: the schemes ``open_store`` takes.
SCHEMES = ("file", "memory", "sqlite", "postgresql", "redis")
MAX_PATH = 4096  # bytes of a path (Linux PATH_MAX)
MAX_NAME = 255  # bytes of one path component (NAME_MAX)
_LOCAL = ("file", "sqlite")
_NETWORK = ("postgresql", "redis")


class StoreNotAllowedError(SidecarError):
    """A request names a database server the operator did not allow (``--allow-store``)."""

    code = grpc.StatusCode.PERMISSION_DENIED

    def __init__(self, field: str, shown: str) -> None:
        super().__init__(
            "STORE_NOT_ALLOWED",
            f"{field}: {shown} matches no --allow-store pattern of this sidecar",
            metadata={"field": field, "store_uri": shown},
        )


def normalize_uri(uri: str, *, field: str) -> str:
    """The canonical form of a store URI: one string for every spelling of one store.

    A file or SQLite store becomes ``file://`` or ``sqlite://`` and its real path, a memory
    store ``memory://<name>``; a PostgreSQL or Redis URI is kept as given (with its
    credentials, which the registry needs to connect), once it parses. A bare path is refused:
    over the wire it would be relative to the sidecar's working directory (``oma serve
    --store`` turns one into a ``file://`` URI before the server sees it).

    Raises:
        InvalidArgument: an unknown scheme or a bare path (reason ``UNKNOWN_STORE_SCHEME``),
            or a malformed URI such as a relative or remote ``file://`` (naming ``field``).
    """
    if "\x00" in uri or "%00" in uri:
        raise InvalidArgument(field, "contains a NUL byte")
    try:
        target = parse_store_uri(uri)
    except ConfigurationError as exc:
        # parse_store_uri says "unknown store URI scheme" for exactly this case.
        unknown = "unknown store URI scheme" in str(exc)
        reason = "UNKNOWN_STORE_SCHEME" if unknown else "VALIDATION"
        raise InvalidArgument(field, str(exc), reason=reason) from None
    except ValueError as exc:  # what the path functions raise (never a password in it)
        raise InvalidArgument(field, f"malformed store URI: {exc}") from None
    if target.kind == "file" and not uri.lower().startswith("file:"):
        raise InvalidArgument(
            field,
            f"store URI {uri!r} has no scheme (supported: {', '.join(SCHEMES)}); "
            "name a file as file:///abs/state.json",
            reason="UNKNOWN_STORE_SCHEME",
        )
    if target.kind in ("postgresql", "redis"):
        return uri  # target.uri masks the password, which opening the store needs
    if target.kind in _LOCAL:
        _check_path_length(target.location, field)
    return target.uri


def _check_path_length(path: str, field: str) -> None:
    encoded = os.fsencode(path)
    if len(encoded) > MAX_PATH:
        raise InvalidArgument(field, f"the path is longer than {MAX_PATH} bytes")
    if any(len(part) > MAX_NAME for part in encoded.split(b"/")):
        raise InvalidArgument(field, f"a path component is longer than {MAX_NAME} bytes")


def default_store_roots(store_uri: str) -> tuple[str, ...]:
    """The store roots when none are given: the directory of a file or SQLite ``--store``."""
    target = parse_store_uri(store_uri)
    return (os.path.dirname(target.location),) if target.kind in _LOCAL else ()


def store_allowed(uri: str, patterns: Sequence[str]) -> bool:
    """Whether a PostgreSQL or Redis ``uri`` matches one of the operator's ``patterns``.

    Patterns are shell-style (``fnmatch``: ``*``, ``?``, ``[...]``) and are matched against
    the URI with its password masked (``shown_uri``), so an operator never writes a password
    into a pattern and a password cannot be guessed through one.
    """
    shown = shown_uri(uri)
    return any(fnmatch.fnmatchcase(shown, pattern) for pattern in patterns)


async def check_request_store(
    uri: str,
    *,
    roots: Sequence[str],
    default_uri: str,
    field: str,
    allowed: Sequence[str] = (),
) -> None:
    """Refuse a request's (normalized) store URI that the operator did not allow.

    A file or SQLite store must lie in one of ``roots`` (real paths) and, if it exists, be a
    regular file, and not in a run journal directory (``sidecar.journals``): a store there
    would read or overwrite a run's journal. A PostgreSQL or Redis store must match one of the
    ``allowed`` patterns (``store_allowed``). ``default_uri`` (the operator's own ``--store``)
    is always allowed.

    Raises:
        InvalidArgument: the path is outside the roots (reason ``STORE_OUTSIDE_ROOT``), or
            names a directory, device, FIFO, a journal directory's file or a path that cannot
            be a file.
        StoreNotAllowedError: a database URI matches none of ``allowed`` (the error shows it
            with its password masked).
    """
    if uri == default_uri:
        return
    target = parse_store_uri(uri)
    if target.kind in _NETWORK:
        if not store_allowed(uri, allowed):
            raise StoreNotAllowedError(field, shown_uri(uri))
        return
    if target.kind not in _LOCAL:
        return
    path = target.location
    if not any(_inside(path, root) for root in roots):
        allowed = ", ".join(roots) if roots else "none: start the sidecar with --store-root DIR"
        raise InvalidArgument(
            field,
            f"{path} is outside the directories this sidecar keeps file stores in ({allowed})",
            reason="STORE_OUTSIDE_ROOT",
        )
    if inside_journal_directory(path):
        raise InvalidArgument(field, f"{path} is in a run journal directory, not a state file")
    problem = await asyncio.to_thread(_file_problem, path)
    if problem is not None:
        raise InvalidArgument(field, f"{path}: {problem}")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _file_problem(path: str) -> str | None:
    """Why ``path`` cannot be a state file (``None``: a regular file, or none yet)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be used as a state file ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device, FIFO ...)"
    return f"is {kind}, not a state file"


def shown_uri(uri: str) -> str:
    """``uri`` as it may be shown to a client or a log: its canonical form, password masked."""
    try:
        return parse_store_uri(uri).uri
    except (ConfigurationError, ValueError):
        return "<unparseable store URI>"  # never echo what may hold a password


class StoreRegistry:
    """Opens each store URI once and closes every store on exit.

    Args:
        keyring: ``--encryption-keys``: every store is handed out wrapped in
            ``EncryptingStore`` (values sealed at rest; ``None``: stores as they are).
    """

    def __init__(self, keyring: KeyRing | None = None) -> None:
        self._keyring = keyring
        self._stores: dict[str, AtomicStore] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> StoreRegistry:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()
        self._stores.clear()

    async def get(self, uri: str) -> MemoryStore:
        """The store of a normalized ``uri``, opened on first use.

        Raises:
            StoreError: the store cannot be opened (unreachable, refused, or a state file that
                another process holds); the next call tries again.
            ConfigurationError: the URI needs an extra that is not installed.
        """
        return await self.atomic(uri)

    async def atomic(self, uri: str) -> AtomicStore:
        """The store of a normalized ``uri``, with ``compare_and_set`` (every store has it)."""
        store = self._stores.get(uri)
        if store is not None:
            return store
        # One lock per URI, never one for all: a slow or hung store (an unreachable server)
        # must not stall the runs of every other store while it opens.
        lock = self._opening.setdefault(uri, asyncio.Lock())
        async with lock:
            store = self._stores.get(uri)
            if store is None:
                store = await self._stack.enter_async_context(open_store(uri))
                if self._keyring is not None:
                    store = EncryptingStore(store, self._keyring)
                self._stores[uri] = store
            return store

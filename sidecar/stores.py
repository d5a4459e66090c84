"""Checkpoint stores named by URI: every ``open_store`` URI (``memory://``, ``file:///``,
``sqlite:///``, ``postgresql://``, ``redis://``), for ``--store`` and a run's ``store_uri``.

One store instance per URI while it is open: a ``FileStore``'s compare-and-set and its write
ordering hold only among callers sharing one instance, so every run (and the run registry)
naming the same file must share it, and one ``memory://name`` is one store for every run that
names it. Every spelling of one file normalizes to one URI (DESIGN D13). The state store and
``memory://`` stores stay open for the life of the server; any other store is closed once
nobody uses it and more than ``MAX_IDLE_STORES`` such stores are open (``StoreRegistry``), and
opened again on its next use.

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
import logging
import os
import stat
import weakref
from collections import OrderedDict
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import grpc

from oma_actors import ConfigurationError, StoreError, open_store
from oma_actors.stores import AtomicStore, EncryptingStore, parse_store_uri
from sidecar.journals import inside_journal_directory
from sidecar.status import InvalidArgument, SidecarError

if TYPE_CHECKING:
    import builtins
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
    from types import TracebackType

    from oma_actors.stores import (
        ConditionalStore,
        Expect,
        ExpiringStore,
        KeyRing,
        MemoryEntry,
        MemoryStore,
        Write,
    )

logger = logging.getLogger(__name__)

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


MAX_IDLE_STORES = 32
"""How many lent stores nobody uses a ``StoreRegistry`` keeps open (the least recently used
beyond are closed): a SQLite store holds three files and a thread, a file store the lock of its
file, a database store its connections."""


class StoreRegistry:
    """Opens the stores runs name, closes those nobody uses beyond a bound, and all on exit.

    The sidecar's state store (:meth:`atomic`) and every ``memory://`` store (its entries live
    in the instance) stay open for the registry's life. Any other store is *lent*: :meth:`get`
    hands out a :class:`LentStore` whose every call holds the store open (:meth:`lease`) and
    reopens it when it was closed, so a store is in use exactly while a call of a run, a watch
    or a request is under way on it. A store nobody uses is idle; the registry keeps at most
    ``max_idle`` idle stores open (the least recently used are closed), so a token holder
    naming a new store per run cannot make the sidecar hold a file, a thread or a connection
    per run for its whole life. While a store is open it is one instance (DESIGN D13): a URI is
    opened again only once its previous instance finished closing.

    Args:
        keyring: ``--encryption-keys``: every store is handed out wrapped in
            ``EncryptingStore`` (values sealed at rest; ``None``: stores as they are).
        max_idle: how many stores nobody uses stay open (``None``: ``MAX_IDLE_STORES``).
    """

    def __init__(self, keyring: KeyRing | None = None, *, max_idle: int | None = None) -> None:
        self._keyring = keyring
        self._max_idle = MAX_IDLE_STORES if max_idle is None else max(0, max_idle)
        self._pinned: dict[str, AtomicStore] = {}
        self._open: dict[str, _Opened] = {}
        self._idle: OrderedDict[str, None] = OrderedDict()  # least recently used first
        self._opening: dict[str, asyncio.Future[None]] = {}
        self._closing: dict[str, asyncio.Task[None]] = {}
        self._lent: weakref.WeakValueDictionary[str, LentStore] = weakref.WeakValueDictionary()
        self._stack = AsyncExitStack()
        self._closed = False

    async def __aenter__(self) -> StoreRegistry:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closed = True
        try:
            while self._closing:
                await asyncio.wait(list(self._closing.values()))
            opened, self._open = self._open, {}
            self._idle.clear()
            for entry in opened.values():
                await _close_quietly(entry)
        finally:
            await self._stack.aclose()
            self._pinned.clear()

    @property
    def open_count(self) -> int:
        """How many lent stores are open now (in use, idle or closing; pinned ones not counted)."""
        return len(self._open) + len(self._closing)

    async def get(self, uri: str) -> MemoryStore:
        """The store of a normalized ``uri``, opened now (a lent one is reopened on later use).

        Raises:
            StoreError: the store cannot be opened (unreachable, refused, or a state file that
                another process holds); the next call tries again.
            ConfigurationError: the URI needs an extra that is not installed.
        """
        if await self._kept(uri) is not None:
            return self._given(uri)
        async with self._leased(uri) as store:
            lent = self._lent.get(uri)
            if lent is None:
                lent = self._lent[uri] = LentStore(self, uri, store)
            return lent

    async def atomic(self, uri: str) -> AtomicStore:
        """The store of a normalized ``uri``, kept open until the registry closes (the
        sidecar's state store); :meth:`get` gives the same object for it from now on."""
        if uri not in self._pinned:
            entry = await self._acquire(uri)
            if uri not in self._pinned:  # else pinned by a concurrent caller meanwhile
                if self._open.get(uri) is entry:
                    del self._open[uri]
                    self._idle.pop(uri, None)
                self._stack.push_async_callback(entry.stack.aclose)
                self._pinned[uri] = entry.store
        return self._given(uri)

    def _given(self, uri: str) -> AtomicStore:
        """What the registry hands out for pinned ``uri``: one object per URI, so the
        ``LentStore`` given for it before it was pinned while that one is still held."""
        lent = self._lent.get(uri)
        # A LentStore has the capabilities of the store it stands for (set per instance).
        return cast("AtomicStore", lent) if lent is not None else self._pinned[uri]

    @asynccontextmanager
    async def lease(self, uri: str) -> AsyncIterator[AtomicStore]:
        """The store of a normalized ``uri``, held open while inside (opened if need be).

        Raises:
            StoreError: the store cannot be opened.
            ConfigurationError: the URI needs an extra that is not installed.
        """
        pinned = await self._kept(uri)
        if pinned is not None:
            yield pinned
            return
        async with self._leased(uri) as store:
            yield store

    @asynccontextmanager
    async def _use(self, uri: str) -> AsyncIterator[AtomicStore]:
        """:meth:`lease` of a URI known not to be a ``memory://`` one (a ``LentStore``'s)."""
        pinned = self._pinned.get(uri)
        if pinned is not None:
            yield pinned
            return
        async with self._leased(uri) as store:
            yield store

    async def _kept(self, uri: str) -> AtomicStore | None:
        """The store of ``uri`` if it is one never closed: pinned, or a ``memory://`` one."""
        store = self._pinned.get(uri)
        if store is None and parse_store_uri(uri).kind == "memory":
            store = await self.atomic(uri)
        return store

    @asynccontextmanager
    async def _leased(self, uri: str) -> AsyncIterator[AtomicStore]:
        entry = await self._acquire(uri)
        try:
            yield entry.store
        finally:
            self._release(uri, entry)

    async def _acquire(self, uri: str) -> _Opened:
        """The open store of ``uri`` with one more user; opened (once, others waiting)."""
        while True:
            if self._closed:
                raise StoreError(f"{shown_uri(uri)}: the sidecar's stores are closed")
            entry = self._open.get(uri)
            if entry is not None:
                entry.users += 1
                self._idle.pop(uri, None)
                return entry
            # One opening per URI, never one for all: a slow or hung store (an unreachable
            # server) must not stall the runs of every other store while it opens. And never
            # while its previous instance still closes (one instance per file, D13).
            busy: asyncio.Future[None] | None = self._closing.get(uri) or self._opening.get(uri)
            if busy is not None:
                await asyncio.wait([busy])  # then look again; a failed opening: try ourselves
                continue
            done = self._opening[uri] = asyncio.get_running_loop().create_future()
            try:
                entry = await self._open_store(uri)
            finally:
                del self._opening[uri]
                done.set_result(None)
            if self._closed:  # the registry closed while this opened: nobody would close it
                await _close_quietly(entry)
                continue
            entry.users = 1
            self._open[uri] = entry
            return entry

    async def _open_store(self, uri: str) -> _Opened:
        stack = AsyncExitStack()
        try:
            store = await stack.enter_async_context(open_store(uri))
        except BaseException:
            await stack.aclose()
            raise
        if self._keyring is not None:
            store = EncryptingStore(store, self._keyring)
        return _Opened(store, stack)

    def _release(self, uri: str, entry: _Opened) -> None:
        """One user less; a store nobody uses becomes idle, the least recently used idle ones
        beyond ``max_idle`` are closed."""
        entry.users -= 1
        if entry.users > 0 or self._open.get(uri) is not entry:
            return  # still used, or pinned or closed meanwhile
        self._idle[uri] = None
        while len(self._idle) > self._max_idle:
            oldest, _ = self._idle.popitem(last=False)
            closing = self._open.pop(oldest)
            self._closing[oldest] = asyncio.get_running_loop().create_task(
                self._close(oldest, closing), name=f"close store {shown_uri(oldest)}"
            )

    async def _close(self, uri: str, entry: _Opened) -> None:
        try:
            await _close_quietly(entry)
        finally:
            del self._closing[uri]


class _Opened:
    """One open instance of a lent store: how to close it, and how many use it now."""

    __slots__ = ("stack", "store", "users")

    def __init__(self, store: AtomicStore, stack: AsyncExitStack) -> None:
        self.store = store
        self.stack = stack
        self.users = 0


async def _close_quietly(entry: _Opened) -> None:
    try:
        await entry.stack.aclose()
    except Exception:  # its pending writes' errors went to their callers
        logger.warning("closing a store failed", exc_info=True)


class LentStore:
    """A store of the registry as its users hold it: every call is made on the store's open
    instance, which stays open during the call (``StoreRegistry.lease``) and is opened again
    if the registry closed it meanwhile.

    It has exactly the capabilities of the store it stands for: ``compare_and_set``, ``apply``
    and ``set_with_expiry`` are present only when that store has them, and ``one_document``
    is the store's.
    """

    # Set per instance, only when the store has them (their signatures are the store's).
    compare_and_set: Callable[..., Awaitable[bool]]
    apply: Callable[..., Awaitable[bool]]
    set_with_expiry: Callable[..., Awaitable[None]]

    def __init__(self, registry: StoreRegistry, uri: str, opened: AtomicStore) -> None:
        self._registry = registry
        self._uri = uri
        # The store's own answer (``oma_actors.stores.base.one_document`` reads it so).
        self._one_document = getattr(opened, "one_document", False) is True
        if callable(getattr(opened, "compare_and_set", None)):
            self.compare_and_set = self._compare_and_set
        if callable(getattr(opened, "apply", None)):
            self.apply = self._apply
        if callable(getattr(opened, "set_with_expiry", None)):
            self.set_with_expiry = self._set_with_expiry

    def __repr__(self) -> str:
        return f"LentStore({shown_uri(self._uri)})"

    @property
    def one_document(self) -> bool:
        """Whether the store is one document (``stores.base.one_document``)."""
        return self._one_document

    async def get(self, key: str) -> MemoryEntry | None:
        """The store's entry at ``key``."""
        async with self._registry._use(self._uri) as store:
            return await store.get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Set ``key`` in the store."""
        async with self._registry._use(self._uri) as store:
            await store.set(key, value, metadata)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """The store's entries (with ``prefix``: those whose key starts with it)."""
        async with self._registry._use(self._uri) as store:
            return await store.list(prefix)

    async def delete(self, key: str) -> None:
        """Delete ``key`` from the store."""
        async with self._registry._use(self._uri) as store:
            await store.delete(key)

    async def clear(self) -> None:
        """Remove every entry of the store."""
        async with self._registry._use(self._uri) as store:
            await store.clear()

    async def _compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        async with self._registry._use(self._uri) as store:
            return await store.compare_and_set(key, expected, value, metadata)

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        async with self._registry._use(self._uri) as store:
            return await cast("ConditionalStore", store).apply(checks, writes)

    async def _set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        async with self._registry._use(self._uri) as store:
            await cast("ExpiringStore", store).set_with_expiry(
                key, value, expires_at_turn, metadata
            )

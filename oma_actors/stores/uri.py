"""``open_store(uri)``: every store named by one URI spelling, for the CLI, the sidecar and code.

========================================  ==============================================
``memory://[name]``                       a new, empty ``InMemoryStore`` (the name is a label)
``file:///abs/state.json``                the process's one ``FileStore`` of that file
``/abs/state.json``, ``state.json``       the same: a bare path is a file store
``sqlite:///abs/state.db``                ``SqliteStore``
``postgresql://user@host:5432/db``        ``PostgresStore`` (also ``postgres://``; ``?table=``)
``redis://host:6379/0``                   ``RedisStore`` (also ``rediss://``; ``?prefix=``)
========================================  ==============================================

One file, one store (DESIGN D13): every spelling of a file (extra slashes, ``..``, symlinked
directories, a relative path) resolves to its real path, and all ``open_store`` calls of this
process that are open at the same time share ONE ``FileStore`` instance, because its
compare-and-set holds only within an instance. ``_SHARES`` tracks them; it is process-wide
because what it models, one open state file per process, is process-wide (the file's lock is
too). The last user to leave closes the store and releases the lock.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.errors import ConfigurationError
from oma_actors.stores.file import FileStore
from oma_actors.stores.memory import InMemoryStore
from oma_actors.stores.postgres import TABLE_NAME, PostgresStore
from oma_actors.stores.redis import RedisStore
from oma_actors.stores.rows import redact
from oma_actors.stores.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from oma_actors.clock import Clock
    from oma_actors.stores.base import AtomicStore

Kind = Literal["memory", "file", "sqlite", "postgresql", "redis"]
SUPPORTED = "memory://, file:///, sqlite:///, postgresql://, redis:// or a file path"


@dataclass(frozen=True, slots=True)
class StoreTarget:
    """What a store URI names: its kind, where it is, and the one option the kind takes.

    Attributes:
        kind: The backend.
        location: The real path (file, sqlite), the name (memory), or the connection URI
            without our own query options (postgresql, redis).
        option: ``table`` of postgresql or ``prefix`` of redis, when the URI gives one.
    """

    kind: Kind
    location: str
    option: str | None = None

    @property
    def uri(self) -> str:
        """The canonical URI: equal for every spelling of one store (passwords masked)."""
        if self.kind in ("file", "sqlite", "memory"):
            return f"{self.kind}://{self.location}"
        if self.option is None:
            return redact(self.location)
        parts = urlsplit(self.location)
        option = urlencode({_OPTION[self.kind]: self.option})
        query = f"{parts.query}&{option}" if parts.query else option
        return redact(urlunsplit(parts._replace(query=query)))


_OPTION = {"postgresql": "table", "redis": "prefix"}


def parse_store_uri(uri: str) -> StoreTarget:
    """Resolve a store URI (or a bare file path) without opening anything.

    Raises:
        ConfigurationError: An unknown scheme or a malformed URI; the message names the URI.
    """
    shown = redact(uri)
    if not uri:
        raise ConfigurationError(f"empty store URI (expected {SUPPORTED})")
    if "://" not in uri and not uri.startswith(("file:", "sqlite:", "memory:")):
        return StoreTarget("file", os.path.realpath(uri))  # a bare path, relative to the cwd
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - parsing the port is what validates it
    except ValueError as exc:
        raise ConfigurationError(f"malformed store URI {shown}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme == "memory":
        _no_query(parts.query, shown)
        return StoreTarget("memory", (parts.netloc + parts.path).strip("/"))
    if scheme in ("file", "sqlite"):
        _no_query(parts.query, shown)
        local: Kind = "file" if scheme == "file" else "sqlite"
        return StoreTarget(local, _local_path(parts.netloc, parts.path, shown))
    if scheme in ("postgresql", "postgres", "redis", "rediss"):
        kind: Kind = "postgresql" if scheme.startswith("postgres") else "redis"
        location, option = _split_option(uri, _OPTION[kind], shown)
        if kind == "postgresql" and option is not None and not TABLE_NAME.fullmatch(option):
            raise ConfigurationError(f"store URI {shown}: table {option!r} is not a plain name")
        if kind == "redis" and parts.path.strip("/") and not parts.path.strip("/").isdigit():
            raise ConfigurationError(f"malformed store URI {shown}: the database must be a number")
        return StoreTarget(kind, location, option)
    raise ConfigurationError(f"unknown store URI scheme {parts.scheme!r} in {shown} ({SUPPORTED})")


@asynccontextmanager
async def open_store(uri: str, *, clock: Clock = SYSTEM_CLOCK) -> AsyncIterator[AtomicStore]:
    """Open the store a URI names, and close it on exit.

    Every store it yields is a ``ConditionalStore`` with ``compare_and_set``; SQLite, PostgreSQL
    and Redis are atomic across processes, a file store within this process only (and it locks
    the file against other processes).

    Args:
        uri: See the table in this module's docstring.
        clock: Stamps ``created_at`` of new keys. A file store already open in this process
            keeps the clock it was opened with.

    Raises:
        ConfigurationError: An unknown scheme, a malformed URI, or a missing extra
            (``postgres``, ``redis``).
        StoreError: The server is unreachable, refused the credentials, or the file is in use
            by another process; the message names the store (never its password).
        CorruptStoreError: The file or database holds something that is not a store.
    """
    target = parse_store_uri(uri)
    async with AsyncExitStack() as stack:
        store: AtomicStore
        if target.kind == "memory":
            store = InMemoryStore(clock=clock)
        elif target.kind == "file":
            store = await stack.enter_async_context(_shared_file_store(target.location, clock))
        elif target.kind == "sqlite":
            store = await stack.enter_async_context(SqliteStore(target.location, clock=clock))
        elif target.kind == "postgresql":
            table = target.option or "oma_kv"
            postgres = PostgresStore(target.location, table=table, clock=clock)
            store = await stack.enter_async_context(postgres)
        else:
            redis = RedisStore(target.location, prefix=target.option or "oma:", clock=clock)
            store = await stack.enter_async_context(redis)
        yield store


def _local_path(netloc: str, path: str, shown: str) -> str:
    if netloc not in ("", "localhost"):
        raise ConfigurationError(f"store URI {shown} names host {netloc!r}; it must be local")
    path = unquote(path)
    if not path.startswith("/"):
        raise ConfigurationError(
            f"store URI {shown} needs an absolute path (file:///abs/state.json); "
            "pass a relative path without a scheme"
        )
    if path.endswith("/"):
        raise ConfigurationError(f"store URI {shown} names a directory, not a file")
    return os.path.realpath(path)


def _no_query(query: str, shown: str) -> None:
    if query:
        raise ConfigurationError(f"store URI {shown} takes no query options")


def _split_option(uri: str, name: str, shown: str) -> tuple[str, str | None]:
    parts = urlsplit(uri)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    options = [value for key, value in pairs if key == name]
    if len(options) > 1 or (options and not options[0]):
        raise ConfigurationError(f"store URI {shown} needs exactly one non-empty {name}=")
    rest = urlencode([(key, value) for key, value in pairs if key != name])
    return urlunsplit(parts._replace(query=rest)), (options[0] if options else None)


@dataclass(slots=True)
class _Share:
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    store: FileStore | None = None
    users: int = 1
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    closing: bool = False


_SHARES: dict[str, _Share] = {}


@asynccontextmanager
async def _shared_file_store(real: str, clock: Clock) -> AsyncIterator[FileStore]:
    share = await _join(real, clock)
    try:
        assert share.store is not None  # _join returns only an opened share
        yield share.store
    finally:
        share.users -= 1
        if share.users == 0:
            # Stay registered until closed: a new opener must not load the file while this
            # store may still be renaming its last write into place.
            share.closing = True
            try:
                await share.stack.aclose()
            finally:
                del _SHARES[real]
                share.closed.set()


async def _join(real: str, clock: Clock) -> _Share:
    while True:
        share = _SHARES.get(real)
        if share is None:
            share = _SHARES[real] = _Share()
            try:
                share.store = await share.stack.enter_async_context(
                    FileStore.open(real, clock=clock)
                )
            except BaseException:
                del _SHARES[real]
                raise
            finally:
                share.ready.set()
            return share
        if share.closing:
            await share.closed.wait()
            continue
        share.users += 1
        try:
            await share.ready.wait()
        except BaseException:
            share.users -= 1
            raise
        if share.store is not None:
            return share
        share.users -= 1  # its opener failed: try (and most likely fail the same way) ourselves


__all__ = ["SUPPORTED", "StoreTarget", "open_store", "parse_store_uri"]

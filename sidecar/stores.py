"""Checkpoint stores named by URI: every ``open_store`` URI (``memory://``, ``file:///``,
``sqlite:///``, ``postgresql://``, ``redis://``), for ``--store`` and a run's ``store_uri``.

One store instance per URI for the life of the server: a ``FileStore``'s compare-and-set and
its write ordering hold only among callers sharing one instance, so every run (and the run
registry) naming the same file must share it, and one ``memory://name`` is one store for every
run that names it. Every spelling of one file normalizes to one URI (DESIGN D13).
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from oma_actors import AtomicStore, ConfigurationError, open_store, parse_store_uri
from sidecar.status import InvalidArgument

if TYPE_CHECKING:
    from types import TracebackType

    from oma_actors import MemoryStore

# What GetServerInfo advertises: the schemes ``open_store`` takes.
SCHEMES = ("file", "memory", "sqlite", "postgresql", "redis")


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
    try:
        target = parse_store_uri(uri)
    except ConfigurationError as exc:
        # parse_store_uri says "unknown store URI scheme" for exactly this case.
        unknown = "unknown store URI scheme" in str(exc)
        reason = "UNKNOWN_STORE_SCHEME" if unknown else "VALIDATION"
        raise InvalidArgument(field, str(exc), reason=reason) from None
    if target.kind == "file" and not uri.lower().startswith("file:"):
        raise InvalidArgument(
            field,
            f"store URI {uri!r} has no scheme (supported: {', '.join(SCHEMES)}); "
            "name a file as file:///abs/state.json",
            reason="UNKNOWN_STORE_SCHEME",
        )
    if target.kind in ("postgresql", "redis"):
        return uri  # target.uri masks the password, which opening the store needs
    return target.uri


class StoreRegistry:
    """Opens each store URI once and closes every store on exit."""

    def __init__(self) -> None:
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
                self._stores[uri] = store
            return store

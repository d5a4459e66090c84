"""Checkpoint stores named by URI: ``memory://[name]`` and ``file:///abs/path.json``.

One store instance per URI for the life of the server: a ``FileStore``'s compare-and-set and
its write ordering hold only among callers sharing one instance, so every run (and the run
registry) naming the same file must share it.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from oma_actors import AtomicStore, FileStore, InMemoryStore
from sidecar.status import InvalidArgument

if TYPE_CHECKING:
    from types import TracebackType

    from oma_actors import MemoryStore

SCHEMES = ("file", "memory")


def normalize_uri(uri: str, *, field: str) -> str:
    """The canonical form of a store URI.

    Raises:
        InvalidArgument: an unknown scheme or a relative file path (naming ``field``).
    """
    parts = urlsplit(uri)
    if parts.scheme == "memory":
        name = (parts.netloc + parts.path).strip("/")
        return f"memory://{name}"
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgument(field, f"file URI must be local, got host {parts.netloc!r}")
        path = unquote(parts.path)
        if not path or not os.path.isabs(path) or path.endswith("/"):
            raise InvalidArgument(field, "file URI needs an absolute file path: file:///abs/x.json")
        return f"file://{os.path.normpath(path)}"
    raise InvalidArgument(
        field,
        f"unknown store scheme {parts.scheme!r} (supported: file://, memory://)",
        reason="UNKNOWN_STORE_SCHEME",
    )


class StoreRegistry:
    """Opens each store URI once and closes the file stores on exit."""

    def __init__(self) -> None:
        self._stores: dict[str, MemoryStore] = {}
        self._stack = AsyncExitStack()
        self._lock = asyncio.Lock()

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
        """The store of a normalized ``uri``, opened on first use."""
        store = self._stores.get(uri)
        if store is not None:
            return store
        async with self._lock:
            store = self._stores.get(uri)
            if store is None:
                store = await self._open(uri)
                self._stores[uri] = store
            return store

    async def atomic(self, uri: str) -> AtomicStore:
        """The store of a normalized ``uri``, which must offer compare-and-set.

        Raises:
            InvalidArgument: the store has no ``compare_and_set`` (naming ``--store``).
        """
        store = await self.get(uri)
        if not isinstance(store, AtomicStore):
            raise InvalidArgument("--store", f"{uri} has no compare-and-set")
        return store

    async def _open(self, uri: str) -> MemoryStore:
        if uri.startswith("file://"):
            path = uri.removeprefix("file://")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            opened: MemoryStore = await self._stack.enter_async_context(FileStore.open(path))
            return opened
        return InMemoryStore()

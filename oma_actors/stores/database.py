"""What the database stores share: their life (open once, ``async with``, closed for good),
and ``set``/``set_with_expiry`` as one upsert.

SQLite, PostgreSQL and Redis stores each hold one handle to their database (a worker thread
owning a connection, a connection pool, a client). How a handle is made and released is each
backend's own; when it is made (once, by the first caller, others waiting), that a closed store
refuses every later call with a ``StoreError`` naming it, and how a driver's failure becomes a
``StoreError`` are decided here once. So is the entry rule of a plain write: a ``set`` is an
upsert with no expiry, so it drops one an earlier ``set_with_expiry`` recorded (MS-05).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from oma_actors.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping
    from types import TracebackType

_H = TypeVar("_H")
_T = TypeVar("_T")


class DatabaseStore(Generic[_H]):
    """Opens a handle of type ``_H`` on first use, shares it, and closes it once.

    A subclass makes the handle in ``_connect`` and releases it in ``_disconnect``; it reaches
    the handle through ``_connected()`` and wraps driver calls in ``_call``, which reports the
    exceptions ``_failures()`` names as a ``StoreError``. It writes one entry in ``_upsert``.

    Args:
        name: How the store names itself in errors (never with a password).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._handle: _H | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    @property
    def name(self) -> str:
        """The store's name in errors."""
        return self._name

    async def open(self) -> Self:
        """Open the database now (creating what the store needs in it); idempotent.

        Raises:
            StoreError: The database is unreachable, refused the store, or the store is closed.
            ConfigurationError: The driver is not installed, or the address is malformed.
        """
        await self._connected()
        return self

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release the database handle; later calls raise ``StoreError``. Idempotent."""
        self._closed = True
        handle, self._handle = self._handle, None
        if handle is not None:
            await self._disconnect(handle)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Insert or replace ``key``; an overwrite keeps ``created_at`` and drops any expiry.

        Raises:
            StoreError: The metadata is not JSON-serializable (nothing was sent), or the write
                failed.
            StoreLimitError: The entry is larger than the store reads back (Redis:
                ``MAX_REPLY_BYTES``); nothing was sent.
        """
        await self._upsert(key, value, metadata, None)

    async def set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Like ``set``, also recording ``expires_at_turn`` (filtering is the caller's job)."""
        await self._upsert(key, value, metadata, expires_at_turn)

    async def _connected(self) -> _H:
        if self._handle is not None:
            return self._handle
        # One opener at a time: concurrent first calls share one handle instead of racing.
        async with self._opening:
            if self._closed:
                raise StoreError(f"{self._name}: the store is closed")
            if self._handle is None:
                handle = await self._connect()
                if self._closed:
                    # aclose() ran while this opened (it takes no lock): it found no handle to
                    # release, so this one is released here rather than left open for good.
                    await self._disconnect(handle)
                    raise StoreError(f"{self._name}: the store is closed")
                self._handle = handle
            return self._handle

    async def _call(self, operation: Awaitable[_T]) -> _T:
        try:
            return await operation
        except self._failures() as exc:
            raise StoreError(f"{self._name}: {exc}") from exc

    def _failures(self) -> tuple[type[Exception], ...]:
        """The exceptions of a driver call that mean "the database failed"."""
        raise NotImplementedError

    async def _upsert(
        self, key: str, value: str, metadata: Mapping[str, Any] | None, expires: int | None
    ) -> None:
        """Write one entry: keep ``created_at`` on an overwrite, replace the rest."""
        raise NotImplementedError

    async def _connect(self) -> _H:
        """Make the handle (the store's table or schema included); raise a typed error if not."""
        raise NotImplementedError

    async def _disconnect(self, handle: _H) -> None:
        """Release ``handle`` after the calls already under way finished."""
        raise NotImplementedError


__all__ = ["DatabaseStore"]

"""The life of a database store: open once on first use, ``async with``, close for good.

SQLite, PostgreSQL and Redis stores each hold one handle to their database (a worker thread
owning a connection, a connection pool, a client). How a handle is made and released is each
backend's own; when it is made (once, by the first caller, others waiting), that a closed store
refuses every later call with a ``StoreError`` naming it, and how a driver's failure becomes a
``StoreError`` are decided here once.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, Self, TypeVar

from oma_actors.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from types import TracebackType

_H = TypeVar("_H")
_T = TypeVar("_T")


class DatabaseLifecycle(Generic[_H]):
    """Opens a handle of type ``_H`` on first use, shares it, and closes it once.

    A subclass makes the handle in ``_connect`` and releases it in ``_disconnect``; it reaches
    the handle through ``_connected()`` and wraps driver calls in ``_call``, which reports the
    exceptions ``_failures()`` names as a ``StoreError``.

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

    async def _connected(self) -> _H:
        if self._handle is not None:
            return self._handle
        # One opener at a time: concurrent first calls share one handle instead of racing.
        async with self._opening:
            if self._closed:
                raise StoreError(f"{self._name}: the store is closed")
            if self._handle is None:
                self._handle = await self._connect()
            return self._handle

    async def _call(self, operation: Awaitable[_T]) -> _T:
        try:
            return await operation
        except self._failures() as exc:
            raise StoreError(f"{self._name}: {exc}") from exc

    def _failures(self) -> tuple[type[Exception], ...]:
        """The exceptions of a driver call that mean "the database failed"."""
        raise NotImplementedError

    async def _connect(self) -> _H:
        """Make the handle (the store's table or schema included); raise a typed error if not."""
        raise NotImplementedError

    async def _disconnect(self, handle: _H) -> None:
        """Release ``handle`` after the calls already under way finished."""
        raise NotImplementedError


__all__ = ["DatabaseLifecycle"]

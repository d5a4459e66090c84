"""A bounded FIFO mailbox that can be closed.

``asyncio.Queue`` on Python 3.11 has no way to refuse new items while letting the queued ones be
drained (``Queue.shutdown`` arrived in 3.13), and shutdown needs exactly that. This is a small
queue with the same waiter discipline as ``asyncio.Queue`` plus ``close()``:

* after ``close()``, every put raises ``ActorStoppedError``, including puts already waiting for
  space;
* ``get()`` keeps returning queued items and raises ``ActorStoppedError`` only once the mailbox
  is both closed and empty, which is how the actor loop learns it has drained.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

from oma_actors.errors import ActorStoppedError, ConfigurationError, MailboxFullError

T = TypeVar("T")


class Mailbox(Generic[T]):
    """A bounded FIFO queue with ``close()``, for one consumer and any number of producers.

    Args:
        maxsize: how many items may wait; must be at least 1.

    Raises:
        ConfigurationError: if ``maxsize`` is smaller than 1.
    """

    __slots__ = ("_closed", "_getters", "_items", "_maxsize", "_putters")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ConfigurationError(f"mailbox size must be at least 1, got {maxsize}")
        self._maxsize = maxsize
        self._items: deque[T] = deque()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._putters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @property
    def maxsize(self) -> int:
        """How many items the mailbox holds before puts wait or fail."""
        return self._maxsize

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def __len__(self) -> int:
        return len(self._items)

    def full(self) -> bool:
        """Return whether a put would have to wait."""
        return len(self._items) >= self._maxsize

    def put_nowait(self, item: T) -> None:
        """Queue ``item`` without waiting.

        Raises:
            ActorStoppedError: if the mailbox is closed.
            MailboxFullError: if the mailbox is full.
        """
        if self._closed:
            raise ActorStoppedError("the mailbox is closed")
        if len(self._items) >= self._maxsize:
            raise MailboxFullError(f"the mailbox is full ({self._maxsize} messages)")
        self._items.append(item)
        if self._getters:
            _wake_next(self._getters)

    async def put(self, item: T) -> None:
        """Queue ``item``, waiting while the mailbox is full (backpressure).

        Raises:
            ActorStoppedError: if the mailbox is closed, before or while waiting.
        """
        while len(self._items) >= self._maxsize and not self._closed:
            putter = asyncio.get_running_loop().create_future()
            self._putters.append(putter)
            try:
                await putter
            except BaseException:
                # Cancelled while waiting. If a slot was handed to us just before the
                # cancellation, pass it on so another producer does not wait for nothing.
                putter.cancel()
                if putter in self._putters:
                    self._putters.remove(putter)
                if not putter.cancelled() and not self.full():
                    _wake_next(self._putters)
                raise
        self.put_nowait(item)

    async def get(self) -> T:
        """Remove and return the oldest item, waiting while the mailbox is empty.

        Raises:
            ActorStoppedError: if the mailbox is closed and empty.
        """
        items = self._items
        while not items:
            if self._closed:
                raise ActorStoppedError("the mailbox is closed and drained")
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                # Same hand-off as in put(): a wake-up we can no longer use goes to the next getter.
                getter.cancel()
                if getter in self._getters:
                    self._getters.remove(getter)
                if not getter.cancelled() and items:
                    _wake_next(self._getters)
                raise
        item = items.popleft()
        if self._putters:
            _wake_next(self._putters)
        return item

    def close(self) -> None:
        """Refuse new items from now on; queued items can still be taken with ``get()``.

        Waiting producers wake up and raise ``ActorStoppedError``; a waiting consumer wakes up
        and raises it too if nothing is queued. Closing twice is harmless.
        """
        if self._closed:
            return
        self._closed = True
        for waiter in (*self._getters, *self._putters):
            if not waiter.done():
                waiter.set_result(None)
        self._getters.clear()
        self._putters.clear()

    def drain_nowait(self) -> list[T]:
        """Remove and return every queued item, oldest first (used once an actor has stopped)."""
        items = list(self._items)
        self._items.clear()
        while self._putters:
            _wake_next(self._putters)
        return items


def _wake_next(waiters: deque[asyncio.Future[None]]) -> None:
    """Wake the oldest waiter that is still waiting (cancelled ones are skipped)."""
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return


__all__ = ["Mailbox"]

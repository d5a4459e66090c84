"""``GroupCommit``: many appenders, one commit per batch (D6, D15).

The batching rule of ``JsonlRunJournal``, for backends whose commit is a database transaction:
the first pending item opens a window of ``window_s`` that later items do not extend (an urgent
item closes it at once); the batch is then committed by ONE call of ``commit``. While a batch is
being committed, new items gather into the next one, so concurrent appenders (of one run or of
many runs) share transactions instead of queueing one transaction each.

``commit`` answers per item (its own result, or the exception that is only that item's fault,
e.g. a duplicate key) or raises for the whole batch (the transaction failed: nothing of it is
visible, and every item of the batch raises that error).

``AppendNowait`` is the shape of a journal's ``append_nowait``: hand events to the open batch
without a task or a coroutine per append, and get back the future of the batch holding them.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from oma_actors.journal.event import JournalEvent

_I = TypeVar("_I")
_R = TypeVar("_R")


class AppendNowait(Protocol):
    """A journal's ``append_nowait(events, now=...)``: queue now, learn the outcome later.

    The returned future is done once the batch holding ``events`` committed (its exception: the
    batch's or the append's own error). It may be shared with other appenders: add a done
    callback, never await it directly (a cancelled awaiter would cancel it for everyone).
    """

    def __call__(self, events: Sequence[JournalEvent], *, now: bool) -> asyncio.Future[Any]:
        """Queue ``events``; raise (nothing queued) when they cannot be appended at all."""
        ...


class GroupCommit(Generic[_I, _R]):
    """Gathers submitted items into batches and commits each batch with one ``commit`` call.

    Args:
        commit: commits a batch; returns one result or exception per item, in order, or raises
            when the whole batch failed.
        window_s: how long the first item of a batch waits for others (0: the next loop turn).
    """

    def __init__(
        self,
        commit: Callable[[Sequence[_I]], Awaitable[Sequence[_R | BaseException]]],
        *,
        window_s: float,
    ) -> None:
        self._commit = commit
        self._window_s = max(0.0, window_s)
        self._items: list[_I] = []
        self._futures: list[asyncio.Future[_R]] = []
        self._window: asyncio.Event | None = None
        self._flushers: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        self.batches = 0
        """How many batches were committed or failed (one transaction each): for tests/benches."""

    async def submit(self, item: _I, *, now: bool = False) -> _R:
        """Add ``item`` to the open batch and return its result once the batch committed.

        Args:
            now: close the batch's window at once (the caller waits on this item).

        Raises:
            Exception: the item's own error, or the whole batch's.
        """
        # Each item has its own future: a cancelled appender cancels only its own wait (the
        # CancelledError reaches it); its item stays in the batch, so its rows may still land,
        # as an append whose outcome the caller did not wait to learn.
        return await self.enqueue(item, now=now)

    def enqueue(self, item: _I, *, now: bool = False) -> asyncio.Future[_R]:
        """``submit`` without waiting: add ``item`` to the open batch, return its own future.

        The future is the item's alone (its result or exception, as ``submit`` returns or
        raises them); it is cancelled only if the commit itself is cancelled.
        """
        future: asyncio.Future[_R] = asyncio.get_running_loop().create_future()
        if self._window is None:
            self._window = asyncio.Event()
            flusher = asyncio.create_task(self._flush_after(self._window))
            self._flushers.add(flusher)
            flusher.add_done_callback(self._flushers.discard)
        self._items.append(item)
        self._futures.append(future)
        if now:
            self._window.set()
        return future

    def flush(self) -> None:
        """Close the open batch's window now: its commit starts without waiting out the window."""
        if self._window is not None:
            self._window.set()

    async def drain(self) -> None:
        """Commit the open batch now and wait until every batch has finished."""
        self.flush()
        while self._flushers:
            await asyncio.gather(*self._flushers, return_exceptions=True)

    async def abort(self) -> None:
        """Cut every batch short: cancel the commits under way and the batch still gathering,
        and wait until they ended. Their appenders' futures are cancelled: whether a commit
        cut short landed is unknown. (A closing owner whose own close was cancelled.)"""
        try:
            for flusher in self._flushers:
                flusher.cancel()
            while self._flushers:
                await asyncio.gather(*self._flushers, return_exceptions=True)
        finally:
            # Items no flusher took (it was cancelled while the window was open).
            futures = self._futures
            self._items, self._futures, self._window = [], [], None
            for future in futures:
                future.cancel()

    async def _flush_after(self, window: asyncio.Event) -> None:
        if self._window_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(window.wait(), self._window_s)
        else:
            await asyncio.sleep(0)  # items submitted in this loop turn share the batch
        async with self._lock:
            # Taken under the lock: whatever arrived while the previous batch was committing
            # rides in this one.
            items, futures = self._items, self._futures
            self._items, self._futures, self._window = [], [], None
            if not items:
                return
            self.batches += 1
            try:
                results = await self._commit(items)
            except Exception as exc:
                for future in futures:
                    _settle(future, exc)
                return
            except BaseException:
                # Cancelled mid-commit (the loop is shutting down): nobody may wait forever,
                # and the cancellation itself propagates.
                for future in futures:
                    future.cancel()
                raise
            if len(results) != len(futures):  # a backend bug; never leave an appender waiting
                error = RuntimeError(f"commit answered {len(results)} of {len(futures)} items")
                results = [error] * len(futures)
            for future, result in zip(futures, results, strict=True):
                _settle(future, result)


def _settle(future: asyncio.Future[_R], result: _R | BaseException) -> None:
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
        future.exception()  # retrieved: an appender that was cancelled must not log it
    else:
        future.set_result(result)


__all__ = ["AppendNowait", "GroupCommit"]

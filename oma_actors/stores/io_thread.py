"""``IoThread``: one thread that runs a file's blocking calls, in the order they were handed over.

A durable append waits on its ``fsync`` off the event loop. ``asyncio.to_thread`` costs about
95 us of CPU per hop on this project's machines (a context copy, an executor work item and the
thread-count bookkeeping of ``ThreadPoolExecutor.submit``, and two chained futures); a thread of
the file's own, fed by a ``queue.SimpleQueue`` and answering with one ``call_soon_threadsafe``,
costs about 26 us (``bench/checkpoint.py``'s P1 counts every boundary's hop). One thread per file
also keeps its calls in order, which a write then a ``close`` rely on.

The thread starts on the first call and ends after ``idle_seconds`` without one, so an owner that
is never closed leaks no thread. It is a daemon: a call still running when the interpreter exits
is cut off like a crash, which is what an append never acknowledged may suffer anyway (D6).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")

_Item = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", "Callable[..., Any]", tuple[Any, ...]
]


class IoThread:
    """Runs blocking calls on one thread of its own, in submission order.

    Args:
        name: the thread's name (shown by debuggers and ``py-spy``).
        idle_seconds: how long the thread waits for a call before it ends (a later call
            starts a new one).
    """

    def __init__(self, name: str, *, idle_seconds: float = 5.0) -> None:
        self._name = name
        self._idle = idle_seconds
        self._calls: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        # Guards ``_alive`` against the race of a call handed over just as the thread, idle,
        # decides to end: both sides decide under it, so a call never waits on no thread.
        self._lock = threading.Lock()
        self._alive = False

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` on the thread; its result or exception settles the returned future.

        The future belongs to the running loop. Cancelling it does not stop the call (a write
        under way cannot be stopped); its outcome is then dropped.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._calls.put((loop, future, fn, args))
            if not self._alive:
                self._alive = True
                threading.Thread(target=self._serve, name=self._name, daemon=True).start()
        return future

    @property
    def alive(self) -> bool:
        """Whether the thread is running (it ends after ``idle_seconds`` without a call)."""
        return self._alive

    def _serve(self) -> None:
        while True:
            try:
                loop, future, fn, args = self._calls.get(timeout=self._idle)
            except queue.Empty:
                with self._lock:
                    if self._calls.empty():
                        self._alive = False
                        return
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the awaiting side, which decides
                _tell(loop, _fail, future, exc)
            else:
                _tell(loop, _succeed, future, result)


def _tell(loop: asyncio.AbstractEventLoop, settle: Callable[..., None], *args: Any) -> None:
    # A closed loop raises RuntimeError: nobody is left to wait for the outcome.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(settle, *args)


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(exc)

"""``IoThread``: one thread that runs a file's blocking calls, in the order they were handed over.

A durable append waits on its ``fsync`` off the event loop. ``asyncio.to_thread`` costs about
95 us of CPU per hop on this project's machines (a context copy, an executor work item and the
thread-count bookkeeping of ``ThreadPoolExecutor.submit``, and two chained futures); a thread of
the file's own, fed by a ``queue.SimpleQueue`` and answering with one ``call_soon_threadsafe``,
costs about 26 us (``bench/checkpoint.py``'s P1 counts every boundary's hop). One thread per file
also keeps its calls in order, which a write then a ``close`` rely on.

The thread starts on the first call and ends when its owner closes it (``close``), or after
``idle_seconds`` without a call, so an owner that is never closed leaks no thread. It is a
daemon: a call still running when the interpreter exits is cut off like a crash, which is
what an append never acknowledged may suffer anyway (D6).
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

# A call: its loop, its future, the function (``None``: end the thread) and its arguments.
_Item = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", "Callable[..., Any] | None", tuple[Any, ...]
]


class IoThread:
    """Runs blocking calls on one thread of its own, in submission order, until closed.

    ``close()`` ends the thread at once, after the calls handed over before it: a process
    opening and closing many journals (a sidecar: one JSONL journal per run) otherwise kept two
    threads per closed journal alive for ``idle_seconds``. A call after ``close()`` starts a
    new thread, which runs it after the closed one ended (order holds).

    Args:
        name: the thread's name (shown by debuggers and ``py-spy``).
        idle_seconds: how long the thread waits for a call before it ends on its own.
    """

    def __init__(self, name: str, *, idle_seconds: float = 5.0) -> None:
        self._name = name
        self._idle = idle_seconds
        # The running thread and its own queue. Guarded against the race of a call handed over
        # just as the thread, idle, decides to end: both sides decide under the lock, so a
        # call never waits on no thread.
        self._lock = threading.Lock()
        self._serving: tuple[threading.Thread, queue.SimpleQueue[_Item]] | None = None
        self._closed_thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        """Whether a thread is serving calls (``close()`` or ``idle_seconds`` end it)."""
        return self._serving is not None

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` on the thread; its result or exception settles the returned future.

        The future belongs to the running loop. Cancelling it does not stop the call (a write
        under way cannot be stopped); its outcome is then dropped.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._serving is None:
                calls: queue.SimpleQueue[_Item] = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._serve,
                    args=(calls, self._closed_thread),
                    name=self._name,
                    daemon=True,
                )
                self._serving = (thread, calls)
                thread.start()
            self._serving[1].put((loop, future, fn, args))
        return future

    async def close(self) -> None:
        """End the thread once every call handed over before this one ran; return when it has.

        A no-op when no thread runs. A cancelled ``close`` leaves the thread to end all the same.
        """
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._serving is None:
                return
            (thread, calls), self._serving = self._serving, None
            self._closed_thread = thread
            calls.put((loop, ended, None, ()))
        await ended
        thread.join()  # settled by its last statement: this waits for its return only

    def _serve(self, calls: queue.SimpleQueue[_Item], previous: threading.Thread | None) -> None:
        if previous is not None:
            previous.join()  # the calls handed over before a close run first
        while True:
            try:
                loop, future, fn, args = calls.get(timeout=self._idle)
            except queue.Empty:
                with self._lock:
                    if calls.empty():
                        if self._serving is not None and self._serving[1] is calls:
                            self._serving = None
                        return
                continue
            if fn is None:  # ``close``: every call handed over before it has run
                _tell(loop, _succeed, future, None)
                return
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

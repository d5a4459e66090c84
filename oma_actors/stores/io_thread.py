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
import functools
import queue
import threading
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")

# A call: its loop, what its outcome is handed to there (``(result, None)`` or ``(None,
# error)``), the function (``None``: end the thread) and its arguments.
_Item = tuple[
    asyncio.AbstractEventLoop,
    "Callable[[Any, BaseException | None], None]",
    "Callable[..., Any] | None",
    tuple[Any, ...],
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
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.call(fn, args, functools.partial(_settle, future))
        return future

    def call(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        answer: Callable[[T | None, BaseException | None], None],
    ) -> None:
        """``submit`` without a future: ``answer(result, error)`` runs on the loop once it ran.

        For a caller that only hands the outcome on (a journal settling its batch): the
        future's done callback was one more turn of the loop between the ``fsync`` and the
        appenders it wakes, on every durable boundary (issue 19).
        """
        loop = asyncio.get_running_loop()
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
            self._serving[1].put((loop, answer, fn, args))

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
            calls.put((loop, functools.partial(_settle, ended), None, ()))
        await ended
        thread.join()  # settled by its last statement: this waits for its return only

    def _serve(self, calls: queue.SimpleQueue[_Item], previous: threading.Thread | None) -> None:
        if previous is not None:
            previous.join()  # the calls handed over before a close run first
        while True:
            try:
                loop, answer, fn, args = calls.get(timeout=self._idle)
            except queue.Empty:
                with self._lock:
                    if calls.empty():
                        if self._serving is not None and self._serving[1] is calls:
                            self._serving = None
                        return
                continue
            if fn is None:  # ``close``: every call handed over before it has run
                _tell(loop, answer, None, None)
                return
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the awaiting side, which decides
                _tell(loop, answer, None, exc)
            else:
                _tell(loop, answer, result, None)


def _tell(
    loop: asyncio.AbstractEventLoop,
    answer: Callable[[Any, BaseException | None], None],
    result: Any,
    error: BaseException | None,
) -> None:
    # A closed loop raises RuntimeError: nobody is left to wait for the outcome.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(answer, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)

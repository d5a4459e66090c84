"""The background renewal of a lease: one owned task per open handle (RS-11).

A ``Heartbeat`` belongs to exactly one ``RunLeaseHandle``, which starts it on acquisition and
stops it on every way out (a terminal command, a release, a loss, ``aclose``, or leaving
``async with ledger.acquire(...)``). Stopping never cancels a renewal in the middle of its store
write: it sets an event, and the loop ends after the beat in progress, so no write is left with
an unknown outcome by our own shutdown. The task never ends in an exception: a beat reports
failure by returning ``False``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

MIN_INTERVAL_MS: Final = 250
"""The shortest time between two renewals (OMA's 250 ms)."""


def heartbeat_interval(ttl_ms: int) -> float:
    """Seconds between renewals of a lease of ``ttl_ms`` milliseconds: ``max(250 ms, ttl / 3)``.

    A third of the lease, so two renewals can fail in a row and the lease is still live (RS-11).
    """
    return max(MIN_INTERVAL_MS, ttl_ms // 3) / 1000


class Heartbeat:
    """Calls ``beat`` every ``interval`` seconds until stopped or until ``beat`` returns False.

    Args:
        beat: One renewal; returns whether the heartbeat should go on. It must not raise.
        interval: Seconds between the end of one beat and the start of the next.
        name: The task's name, for debugging.
    """

    def __init__(self, beat: Callable[[], Awaitable[bool]], interval: float, *, name: str) -> None:
        self._beat = beat
        self._interval = interval
        self._name = name
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether the renewal task exists and has not finished."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the renewal task (once); it is owned here and awaited by ``stop``."""
        if self._task is None and not self._stop.is_set():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    def request_stop(self) -> None:
        """Ask the loop to end after the beat in progress; does not wait (safe from a beat)."""
        self._stop.set()

    async def stop(self) -> None:
        """Stop and wait until the task has ended.

        The wait is shielded: if the caller is cancelled while waiting, the cancellation
        propagates to the caller, and the task still finishes its beat and ends on its own.
        """
        self._stop.set()
        task = self._task
        if task is None or task is asyncio.current_task():
            return
        await asyncio.shield(task)

    async def _run(self) -> None:
        while not await self._stopped_during_sleep():
            if not await self._beat():
                return

    async def _stopped_during_sleep(self) -> bool:
        try:
            async with asyncio.timeout(self._interval):
                await self._stop.wait()
        except TimeoutError:
            return self._stop.is_set()
        return True

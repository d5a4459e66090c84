"""``ActorRef[M]``: the only way to reach an actor (``tell``, ``send``, ``ask``, ``stop``).

Ordering: an actor has one FIFO mailbox and processes one message at a time, so messages from
one sender are processed in the order that sender sent them. Messages from different senders
interleave in arrival order.

The hot path of ``ask`` is one Future and one tuple per call: no task per ask, and no timer
unless a timeout is given.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic

from typing_extensions import TypeVar

from oma_actors.errors import AskTimeoutError

if TYPE_CHECKING:
    from oma_actors.actors.cell import ActorCell

M_contra = TypeVar("M_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True, default=object)


class ActorRef(Generic[M_contra, R_co]):
    """A handle on a running actor that accepts messages of type ``M_contra`` and answers ``R_co``.

    Refs are returned by ``ActorSystem.spawn``; they are cheap to copy and share. The message
    parameter is contravariant: a ref to an actor accepting ``Ping | Stop`` can be passed where
    an ``ActorRef[Ping]`` is expected. The reply parameter is covariant and defaults to
    ``object``: an ``ActorRef[Ping, int]`` is also an ``ActorRef[Ping]`` whose ``ask`` answers an
    ``object``.
    """

    __slots__ = ("_cell", "_loop", "_mailbox")

    def __init__(self, cell: ActorCell[M_contra, R_co], loop: asyncio.AbstractEventLoop) -> None:
        self._cell = cell
        self._mailbox = cell.mailbox
        self._loop = loop

    @property
    def name(self) -> str:
        """The actor's name, unique within its system."""
        return self._cell.name

    @property
    def is_alive(self) -> bool:
        """Whether the actor still accepts messages (False once stopping or stopped)."""
        return not self._mailbox.closed

    def tell(self, message: M_contra) -> None:
        """Queue a message without waiting and without an answer.

        Raises:
            MailboxFullError: if the actor's mailbox is full (use ``send`` to wait instead).
            ActorStoppedError: if the actor is stopping or stopped.
        """
        self._mailbox.put_nowait((message, None))

    async def send(self, message: M_contra) -> None:
        """Queue a message without an answer, waiting while the mailbox is full.

        Raises:
            ActorStoppedError: if the actor is stopping or stopped, also while waiting.
        """
        await self._mailbox.put((message, None))

    # ASYNC109 prefers callers wrapping asyncio.timeout(); ask keeps a timeout argument because
    # AskTimeoutError must tell the ask's own deadline apart from the caller's.
    async def ask(self, message: M_contra, *, timeout: float | None = None) -> R_co:  # noqa: ASYNC109
        """Send a message and wait for what the actor's ``receive`` returns.

        Waits for mailbox space like ``send``. The timeout covers both the wait for space and
        the wait for the answer. If the asker gives up (timeout or cancellation) after the
        message was queued, the actor still processes it and the answer is dropped.

        Args:
            message: the message.
            timeout: seconds to wait in total; ``None`` waits as long as it takes.

        Returns:
            The value ``receive`` returned (typed by the actor's ``Actor[M, R]``).

        Raises:
            AskTimeoutError: if no answer arrived within ``timeout``.
            ActorStoppedError: if the actor is stopped, or stops before it answers.
            Exception: whatever ``receive`` raised for this message.
        """
        reply: asyncio.Future[R_co] = self._loop.create_future()
        if timeout is None:
            await self._enqueue(message, reply)
            return await reply
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                await self._enqueue(message, reply)
                return await reply
        except TimeoutError:
            # receive() may raise TimeoutError itself; only our deadline becomes AskTimeoutError.
            if deadline.expired():
                raise AskTimeoutError(
                    f"actor {self.name!r} did not answer within {timeout}s"
                ) from None
            raise

    async def _enqueue(self, message: M_contra, reply: asyncio.Future[R_co]) -> None:
        mailbox = self._mailbox
        if mailbox.full():
            await mailbox.put((message, reply))
        else:
            mailbox.put_nowait((message, reply))

    async def stop(self) -> None:
        """Stop the actor once it has processed the messages already queued.

        New messages are refused at once. Returns when the actor has stopped and its ``on_stop``
        has run; called from inside the actor itself, it returns at once and the actor stops
        after the current message and the queue. Stopping a stopped actor is harmless.
        """
        cell = self._cell
        cell.mailbox.close()
        task = cell.task
        if task.done() or task is asyncio.current_task():
            return
        # asyncio.wait, not ``await task``: if the caller is cancelled, the actor must not be.
        await asyncio.wait((task,))

    def __repr__(self) -> str:
        state = "alive" if self.is_alive else "stopped"
        return f"<ActorRef {self.name!r} {state}>"


__all__ = ["ActorRef"]

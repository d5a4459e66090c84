"""The ``Actor[M]`` base class: private state plus a ``receive`` for one closed message union.

An actor is only ever reached through the ``ActorRef`` that ``ActorSystem.spawn`` returns; its
hooks run in the actor's own task, one message at a time, so its state needs no locks::

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Add:
        amount: int

    @dataclass(frozen=True, slots=True)
    class Total:
        pass

    class Counter(Actor[Add | Total]):
        def __init__(self) -> None:
            self.total = 0

        async def receive(self, message: Add | Total) -> object:
            match message:
                case Add(amount=amount):
                    self.total += amount
                    return None
                case Total():
                    return self.total
                case _:
                    assert_never(message)
"""

from __future__ import annotations

import abc
from typing import Generic, TypeVar

M = TypeVar("M")


class Actor(abc.ABC, Generic[M]):
    """Base class of every actor; ``M`` is the union of messages it accepts.

    Subclasses override ``receive`` and may override ``on_start`` and ``on_stop``. They need not
    call ``super().__init__()``: the kernel keeps its bookkeeping outside the actor object.
    """

    @abc.abstractmethod
    async def receive(self, message: M) -> object:
        """Handle one message.

        Args:
            message: the next message from the mailbox.

        Returns:
            The answer to an ``ask`` (ignored for ``tell`` and ``send``).

        Raises:
            Exception: any exception is a failure handled by the actor's ``Supervision``; the
                ``ask`` that sent the message receives it.
        """

    async def on_start(self) -> None:
        """Run in the actor's task before the first message; a failure counts as a failure."""

    async def on_stop(self) -> None:
        """Run in the actor's task once it stops (drained, failed, cancelled or shut down).

        Called once for every instance whose ``on_start`` completed, also during cancellation, so
        it should be short. On restart, the failed instance's ``on_stop`` runs before the fresh
        instance's ``on_start``.
        """


__all__ = ["Actor"]

"""The ``Actor[M, R]`` base class: private state plus a ``receive`` for one closed message union.

``M`` is the union of messages the actor accepts and ``R`` what its ``receive`` answers (``object``
when not given), so ``ActorSystem.spawn`` returns an ``ActorRef[M, R]`` whose ``ask`` is typed.
An actor is only ever reached through that ref; its hooks run in the actor's own task, one
message at a time, so its state needs no locks::

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Add:
        amount: int

    @dataclass(frozen=True, slots=True)
    class Total:
        pass

    CounterMessage = Add | Total

    class Counter(Actor[CounterMessage, int | None]):
        def __init__(self) -> None:
            self.total = 0

        async def receive(self, message: CounterMessage) -> int | None:
            match message:
                case Add(amount=amount):
                    self.total += amount
                    return None
                case Total():
                    return self.total
                case _:
                    assert_never(message)

The ``case _: assert_never(message)`` arm makes the type checker prove the match exhaustive: a
message added to the union but not handled is a type error, not a silently ignored message.
"""

from __future__ import annotations

import abc
from typing import Generic

# typing_extensions for the TypeVar default (PEP 696, in ``typing`` from Python 3.13 on): an actor
# declared as ``Actor[M]`` answers ``object``, as before replies were typed.
from typing_extensions import TypeVar

M = TypeVar("M")
R_co = TypeVar("R_co", covariant=True, default=object)


class Actor(abc.ABC, Generic[M, R_co]):
    """Base class of every actor; ``M`` is the union of messages it accepts, ``R_co`` its reply.

    Subclasses override ``receive`` and may override ``on_start`` and ``on_stop``. They need not
    call ``super().__init__()``: the kernel keeps its bookkeeping outside the actor object.
    """

    @abc.abstractmethod
    async def receive(self, message: M) -> R_co:
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

"""``ActorSystem``: the async context manager that owns every actor task.

Lifecycle::

    async with ActorSystem(drain_timeout=5.0) as system:
        counter = system.spawn(Counter, name="counter")  # an ActorRef[CounterMessage, int | None]
        counter.tell(Add(amount=2))
        total = await counter.ask(Total())  # typed int | None, what Counter.receive returns

Every actor runs as a task of one ``asyncio.TaskGroup`` entered in ``__aenter__``, so no actor
outlives its system. Shutdown (``__aexit__`` or ``shutdown()``) goes in two phases:

1. *drain*: every mailbox is closed (new messages raise ``ActorStoppedError``) and each actor
   processes what is already queued, for at most the grace period;
2. *cancel*: actors still running are cancelled. The ask being processed and every ask still
   queued fail with ``ActorStoppedError``; ``on_stop`` runs for every started actor.

Exits, in order of precedence (every one waits for all actor tasks to end):

* a cancellation of the task running the ``async with``, or a ``BaseException`` such as
  ``KeyboardInterrupt`` from the body, propagates and skips the drain;
* an escalated failure raises ``ActorFailedError`` from the actor's exception and skips the
  drain; an exception the body raised meanwhile is kept as its ``__context__``;
* otherwise the body's own exception, if any, propagates unchanged (never as an
  ``ExceptionGroup``) after a normal drain.

Escalation interrupts the body the way ``TaskGroup`` does when a child fails: the system cancels
the task that entered it and takes that one cancellation back in ``__aexit__`` (``uncancel``), so
a cancellation that came from elsewhere still propagates.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from typing_extensions import TypeVar

from oma_actors.actors.actor import Actor
from oma_actors.actors.cell import ActorCell, Envelope
from oma_actors.actors.mailbox import Mailbox
from oma_actors.actors.ref import ActorRef
from oma_actors.actors.supervision import DEFAULT_SUPERVISION, Supervision, SupervisionKind
from oma_actors.errors import ActorFailedError, ActorStoppedError, ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

M = TypeVar("M")
R = TypeVar("R", default=object)


class ActorSystem:
    """Owns a set of actors and their tasks; use it as ``async with ActorSystem() as system``.

    Args:
        drain_timeout: the default grace period, in seconds, that shutdown gives actors to
            process their queued messages before cancelling them.
    """

    def __init__(self, *, drain_timeout: float = 5.0) -> None:
        if drain_timeout < 0:
            raise ConfigurationError(f"drain_timeout must be >= 0, got {drain_timeout}")
        self._drain_timeout = drain_timeout
        self._tg = asyncio.TaskGroup()
        self._cells: dict[str, ActorCell[Any, Any]] = {}
        self._serial = 0
        self._entered = False
        self._closing = False
        self._exiting = False
        self._parent: asyncio.Task[object] | None = None
        self._parent_cancel_requested = False
        self._failure: tuple[str, Exception] | None = None

    async def __aenter__(self) -> ActorSystem:
        if self._entered:
            raise ConfigurationError("an ActorSystem can be entered only once")
        self._entered = True
        self._parent = asyncio.current_task()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._exiting = True
        cancel = exc if isinstance(exc, asyncio.CancelledError) else None
        # KeyboardInterrupt, SystemExit and the like skip the drain and win over everything.
        fatal = exc is not None and not isinstance(exc, Exception) and cancel is None
        if self._parent_cancel_requested and self._parent is not None:
            # Take back the one cancellation an escalation requested; any other is real.
            self._parent_cancel_requested = False
            if self._parent.uncancel() == 0:
                cancel = None
        try:
            if cancel is not None or self._failure is not None or fatal:
                self._abort()
            else:
                await self.shutdown()
        except asyncio.CancelledError as error:
            # Cancelled while draining. Escalations do not cancel an exiting system, so this is a
            # real cancellation: stop waiting, cancel the actors, let the TaskGroup re-raise it.
            self._abort()
            cancel = error
        # The TaskGroup waits for every actor task. Handed the cancellation, it re-raises it
        # once they are done; handed nothing, it never wraps the body's exception in a group.
        if cancel is not None:
            await self._tg.__aexit__(type(cancel), cancel, cancel.__traceback__)
        else:
            await self._tg.__aexit__(None, None, None)
        if self._failure is not None and not fatal:
            name, cause = self._failure
            raise ActorFailedError(name) from cause

    def spawn(
        self,
        actor: Actor[M, R] | Callable[[], Actor[M, R]],
        *,
        name: str | None = None,
        mailbox_size: int = 1000,
        supervision: Supervision = DEFAULT_SUPERVISION,
    ) -> ActorRef[M, R]:
        """Start an actor in this system and return its ref.

        Args:
            actor: an actor instance, or a factory (such as the actor class) that builds one.
                ``Supervision.restart()`` needs a factory, to build fresh instances.
            name: a name unique among this system's live actors; defaults to the class name
                plus a serial number.
            mailbox_size: how many messages may wait in the mailbox.
            supervision: what a failure in the actor does (see ``Supervision``).

        Returns:
            The ref to the new actor, typed by the actor's messages and reply. Its ``on_start``
            runs in its task before the first message.

        Raises:
            ConfigurationError: if the system was not entered, the name is taken, the mailbox
                size is below 1, or restart supervision is given an instance.
            ActorStoppedError: if the system is shutting down.
        """
        if not self._entered:
            raise ConfigurationError("spawn() needs a running system: use 'async with'")
        if self._closing:
            raise ActorStoppedError("the actor system is shutting down")
        if isinstance(actor, Actor):
            instance, factory = actor, None
            if supervision.kind is SupervisionKind.RESTART:
                raise ConfigurationError("Supervision.restart() needs a factory, not an instance")
        else:
            instance, factory = actor(), actor
        self._serial += 1
        name = name if name is not None else f"{type(instance).__name__}-{self._serial}"
        if name in self._cells:
            raise ConfigurationError(f"an actor named {name!r} is already running")
        mailbox: Mailbox[Envelope[M, R]] = Mailbox(mailbox_size)
        cell = ActorCell(
            name=name,
            actor=instance,
            factory=factory,
            mailbox=mailbox,
            supervision=supervision,
            escalate=self._escalate,
        )
        cell.task = self._tg.create_task(cell.run(), name=f"actor:{name}")
        # The registry only closes mailboxes and cancels tasks, whatever the cell's types.
        self._cells[name] = cell
        cell.task.add_done_callback(functools.partial(self._on_actor_done, cell))
        return ActorRef(cell, asyncio.get_running_loop())

    async def stop(self, ref: ActorRef[M]) -> None:
        """Stop one actor after it drains its queue; the same as ``await ref.stop()``."""
        await ref.stop()

    async def shutdown(self, grace: float | None = None) -> None:
        """Close every mailbox, let actors drain for ``grace`` seconds, then cancel the rest.

        Afterwards ``spawn`` raises ``ActorStoppedError``. ``__aexit__`` calls this; calling it
        earlier, or twice, is harmless.

        Args:
            grace: seconds to wait for actors to drain; defaults to the system's
                ``drain_timeout``.
        """
        self._closing = True
        for cell in list(self._cells.values()):
            cell.mailbox.close()
        tasks = {cell.task for cell in self._cells.values()}
        if not tasks:
            return
        try:
            _, pending = await asyncio.wait(
                tasks, timeout=self._drain_timeout if grace is None else grace
            )
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        except asyncio.CancelledError:
            self._abort()
            raise

    def _abort(self) -> None:
        """Close every mailbox and cancel every actor task, without waiting (the cancel phase)."""
        self._closing = True
        current = asyncio.current_task()
        for cell in list(self._cells.values()):
            cell.mailbox.close()
            if cell.task is not current:
                cell.task.cancel()

    def _escalate(self, name: str, error: Exception) -> None:
        """Record an escalated failure and shut the system down (called from the failing actor)."""
        if self._failure is None:
            self._failure = (name, error)
        self._abort()
        parent = self._parent
        if (
            not self._exiting
            and not self._parent_cancel_requested
            and parent is not None
            and not parent.done()
        ):
            # Interrupt the body of the ``async with``; __aexit__ takes this cancellation back.
            self._parent_cancel_requested = True
            parent.cancel()

    def _on_actor_done(self, cell: ActorCell[Any, Any], task: asyncio.Task[None]) -> None:
        cell.release()
        if self._cells.get(cell.name) is cell:
            del self._cells[cell.name]


__all__ = ["ActorSystem"]

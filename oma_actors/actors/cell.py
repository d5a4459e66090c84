"""The cell that runs one actor: its message loop, lifecycle hooks and supervision.

A cell is private to the kernel. ``ActorSystem.spawn`` builds one, runs ``cell.run()`` as a task
of the system's TaskGroup and hands out an ``ActorRef`` that points at the cell's mailbox.

Why the loop never raises: a task that fails inside a TaskGroup aborts the whole group, which is
right only for ``Supervision.escalate()``, and even then the system wants to choose how it shuts
down. So every ``Exception`` from actor code is routed through the policy here, escalation is a
callback into the system, and the only thing that can end ``run()`` abnormally is cancellation
(or another ``BaseException``), which always propagates.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Generic, TypeAlias

from typing_extensions import TypeVar

from oma_actors.actors.supervision import RestartBudget, Supervision, SupervisionKind
from oma_actors.errors import ActorStoppedError

if TYPE_CHECKING:
    from collections.abc import Callable

    from oma_actors.actors.actor import Actor
    from oma_actors.actors.mailbox import Mailbox

logger = logging.getLogger("oma_actors.actors")

M = TypeVar("M")
R = TypeVar("R", default=object)

Reply: TypeAlias = asyncio.Future[R] | None
"""Where the answer goes: a Future for an ``ask``, ``None`` for ``tell``/``send``."""

Envelope: TypeAlias = tuple[M, Reply[R]]
"""What a mailbox holds: a message and where its answer goes (a tuple: the hot path is cheap)."""


class ActorCell(Generic[M, R]):
    """Runs one actor in one task.

    Args:
        name: the actor's name, unique within its system.
        actor: the first instance.
        factory: builds fresh instances for ``Supervision.restart()``; ``None`` if spawned from
            an instance.
        mailbox: the actor's mailbox.
        supervision: the failure policy.
        escalate: called with the actor's name and error under ``Supervision.escalate()``.
    """

    __slots__ = (
        "_actor",
        "_budget",
        "_escalate",
        "_factory",
        "_started",
        "mailbox",
        "name",
        "supervision",
        "task",
    )

    task: asyncio.Task[None]  # set by the system right after the cell is created

    def __init__(
        self,
        *,
        name: str,
        actor: Actor[M, R],
        factory: Callable[[], Actor[M, R]] | None,
        mailbox: Mailbox[Envelope[M, R]],
        supervision: Supervision,
        escalate: Callable[[str, Exception], None],
    ) -> None:
        self.name = name
        self.mailbox = mailbox
        self.supervision = supervision
        self._actor = actor
        self._factory = factory
        self._escalate = escalate
        self._budget = RestartBudget(supervision)
        self._started = False

    async def run(self) -> None:
        """Start the actor, serve its mailbox until it closes and drains, then stop the actor."""
        try:
            if await self._start():
                await self._serve()
        finally:
            # Fail queued asks first so their askers need not wait for on_stop.
            self.release()
            await self._stop_instance()

    def release(self) -> None:
        """Close the mailbox and fail every queued ask with ``ActorStoppedError``.

        Idempotent and synchronous, so the system can also call it from the task's done callback:
        a task cancelled before its first step never runs the ``finally`` in ``run()``.
        """
        self.mailbox.close()
        dropped = 0
        for _message, reply in self.mailbox.drain_nowait():
            if reply is None:
                dropped += 1
            elif not reply.done():
                reply.set_exception(self.stopped_error())
        if dropped:
            logger.warning("actor %r stopped with %d unprocessed tell(s)", self.name, dropped)

    def stopped_error(self) -> ActorStoppedError:
        """The error given to asks this actor will never answer."""
        return ActorStoppedError(f"actor {self.name!r} stopped before it answered")

    async def _serve(self) -> None:
        get = self.mailbox.get
        while True:
            try:
                message, reply = await get()
            except ActorStoppedError:
                return  # closed and drained
            try:
                result = await self._actor.receive(message)
            except Exception as exc:
                if not await self._recover(exc, reply, f"message {type(message).__name__}"):
                    return
            except BaseException:
                # Cancelled mid-message: the asker learns that the actor stopped, and the
                # cancellation carries on.
                if reply is not None and not reply.done():
                    reply.set_exception(self.stopped_error())
                raise
            else:
                # An asker that timed out or was cancelled has already cancelled its Future; the
                # message was still delivered and processed, only the answer is dropped.
                if reply is not None and not reply.done():
                    reply.set_result(result)

    async def _start(self) -> bool:
        """Run ``on_start``; return whether the actor is running (a failure may restart it)."""
        try:
            await self._actor.on_start()
        except Exception as exc:
            return await self._recover(exc, None, "on_start")
        self._started = True
        return True

    async def _stop_instance(self) -> None:
        """Run ``on_stop`` of the current instance once, if its ``on_start`` completed."""
        if not self._started:
            return
        self._started = False
        try:
            await self._actor.on_stop()
        except Exception as exc:
            if self.supervision.kind is SupervisionKind.ESCALATE:
                self._escalate(self.name, exc)
            else:
                logger.error("actor %r failed in on_stop", self.name, exc_info=exc)

    async def _recover(self, exc: Exception, reply: Reply[R], where: str) -> bool:
        """Apply the supervision policy to a failure; return whether the actor carries on."""
        if reply is not None and not reply.done():
            reply.set_exception(exc)
        kind = self.supervision.kind
        if kind is SupervisionKind.ESCALATE:
            self._escalate(self.name, exc)
            return False
        if reply is None:
            # Nobody else will see a failing tell or hook, so it is logged with its traceback.
            logger.error("actor %r failed in %s", self.name, where, exc_info=exc)
        loop = asyncio.get_running_loop()
        if (
            kind is SupervisionKind.RESTART
            and self._factory is not None
            and self._budget.take(loop.time())
        ):
            logger.warning("restarting actor %r after a failure in %s", self.name, where)
            await self._stop_instance()
            try:
                self._actor = self._factory()
            except Exception as factory_exc:
                logger.error("actor %r could not be rebuilt", self.name, exc_info=factory_exc)
                return False
            return await self._start()
        logger.warning("actor %r stopped after a failure in %s", self.name, where)
        return False


__all__ = ["ActorCell", "Envelope", "Reply"]

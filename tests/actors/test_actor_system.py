"""Tests of ``ActorSystem``: spawn, drain-then-cancel shutdown, task ownership, exits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import assert_never

import pytest

from oma_actors.actors import Actor, ActorRef, ActorSystem
from oma_actors.errors import ActorStoppedError, ConfigurationError

# A kernel bug tends to hang rather than fail; keep such a hang short.
pytestmark = pytest.mark.timeout(10)


@dataclass(frozen=True, slots=True)
class Work:
    n: int


@dataclass(frozen=True, slots=True)
class Block:
    """Block in ``receive`` until cancelled."""


@dataclass(frozen=True, slots=True)
class Swallow:
    """Await a cancelled future, so ``receive`` raises CancelledError by itself."""


Msg = Work | Block | Swallow


@dataclass
class Slow(Actor[Msg]):
    """Takes a moment per message and records what it did."""

    done: list[int] = field(default_factory=list)
    stopped: bool = False
    cancelled_in_receive: bool = False

    async def receive(self, message: Msg) -> object:
        match message:
            case Work(n=n):
                await asyncio.sleep(0.001)
                self.done.append(n)
                return n
            case Block():
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancelled_in_receive = True
                    raise
                return None
            case Swallow():
                future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                future.cancel()
                await future
                return None
            case _:
                assert_never(message)

    async def on_stop(self) -> None:
        self.stopped = True


class Finished(BaseException):
    """A non-Exception escape from the body (like KeyboardInterrupt, without the side effects)."""


def _only_me_left() -> bool:
    return asyncio.all_tasks() == {asyncio.current_task()}


async def _capture(awaitable: Awaitable[object]) -> object:
    try:
        return await awaitable
    except Exception as exc:
        return exc


async def test_shutdown_drains_queued_messages_within_the_grace_period() -> None:
    actors = [Slow() for _ in range(3)]
    async with ActorSystem(drain_timeout=5.0) as system:
        for actor in actors:
            ref = system.spawn(actor)
            for i in range(20):
                ref.tell(Work(i))
    for actor in actors:
        assert actor.done == list(range(20))
        assert actor.stopped
    assert _only_me_left()


async def test_a_blocked_actor_is_cancelled_after_the_grace_and_its_asks_fail() -> None:
    actor = Slow()
    async with asyncio.TaskGroup() as outer, ActorSystem(drain_timeout=0.05) as system:
        ref = system.spawn(actor)
        in_flight = outer.create_task(_capture(ref.ask(Block(), timeout=1.0)))
        queued = outer.create_task(_capture(ref.ask(Work(1), timeout=1.0)))
        await asyncio.sleep(0.01)
        ref.tell(Work(2))
    assert isinstance(in_flight.result(), ActorStoppedError)
    assert isinstance(queued.result(), ActorStoppedError)
    assert actor.cancelled_in_receive
    assert actor.done == []
    assert actor.stopped  # on_stop runs even for a cancelled actor
    assert _only_me_left()


async def test_explicit_shutdown_with_zero_grace_cancels_at_once() -> None:
    actor = Slow()
    async with ActorSystem(drain_timeout=60.0) as system:
        ref = system.spawn(actor)
        ref.tell(Block())
        await asyncio.sleep(0)
        async with asyncio.timeout(1):
            await system.shutdown(grace=0)
        assert actor.stopped
        assert not ref.is_alive
        with pytest.raises(ActorStoppedError):
            system.spawn(Slow())
    assert _only_me_left()


async def test_cancelling_a_shutdown_cancels_the_actors_at_once() -> None:
    actor = Slow()
    async with ActorSystem(drain_timeout=60.0) as system:
        ref = system.spawn(actor)
        ref.tell(Block())
        async with asyncio.TaskGroup() as tg:
            stopper = tg.create_task(system.shutdown())
            await asyncio.sleep(0.01)
            assert not stopper.done()  # draining: the actor is blocked
            stopper.cancel()
        await asyncio.sleep(0)
        assert actor.cancelled_in_receive  # not left running until the system exits
        assert actor.stopped


async def test_no_task_outlives_the_system() -> None:
    async with ActorSystem(drain_timeout=0.05) as system:
        for i in range(10):
            ref = system.spawn(Slow(), name=f"a{i}")
            ref.tell(Block() if i % 2 else Work(i))
        assert len(asyncio.all_tasks()) == 11
    assert _only_me_left()


async def test_the_body_exception_is_re_raised_unchanged() -> None:
    actor = Slow()
    error = ValueError("from the body")

    async def scenario() -> None:
        async with ActorSystem() as system:
            system.spawn(actor).tell(Work(1))
            raise error

    with pytest.raises(ValueError, match="from the body") as info:
        await scenario()
    assert info.value is error  # not wrapped in an ExceptionGroup
    assert actor.done == [1]  # an ordinary exception still drains
    assert actor.stopped
    assert _only_me_left()


async def test_a_base_exception_from_the_body_skips_the_drain() -> None:
    actor = Slow()

    async def scenario() -> None:
        async with ActorSystem(drain_timeout=60.0) as system:
            system.spawn(actor).tell(Block())
            await asyncio.sleep(0)
            raise Finished

    with pytest.raises(Finished):
        await scenario()
    assert actor.cancelled_in_receive
    assert _only_me_left()


async def test_an_actor_cancelled_before_it_ran_drops_its_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="oma_actors.actors")
    refs: list[ActorRef[Msg]] = []

    async def scenario() -> None:
        async with ActorSystem() as system:
            refs.append(system.spawn(Slow()))
            refs[0].tell(Work(1))
            raise Finished  # before the actor's task ever ran

    with pytest.raises(Finished):
        await scenario()
    assert not refs[0].is_alive
    assert any("1 unprocessed tell" in r.getMessage() for r in caplog.records)


async def test_cancelling_the_owner_cancels_the_actors_and_propagates() -> None:
    actor = Slow()
    entered = asyncio.Event()

    async def owner() -> None:
        async with ActorSystem(drain_timeout=60.0) as system:
            system.spawn(actor).tell(Block())
            entered.set()
            await asyncio.Event().wait()

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(owner())
        await entered.wait()
        await asyncio.sleep(0)
        task.cancel()
    assert task.cancelled()
    assert actor.cancelled_in_receive
    assert actor.stopped
    assert _only_me_left()


async def test_cancelling_the_owner_during_the_drain_propagates() -> None:
    actor = Slow()
    draining = asyncio.Event()

    async def owner() -> None:
        async with ActorSystem(drain_timeout=60.0) as system:
            system.spawn(actor).tell(Block())
            await asyncio.sleep(0)
            draining.set()

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(owner())
        await draining.wait()
        await asyncio.sleep(0.01)  # the owner is now waiting in the drain
        assert not task.done()
        task.cancel()
    assert task.cancelled()
    assert actor.stopped
    assert _only_me_left()


async def test_a_cancelled_error_raised_inside_receive_is_not_swallowed() -> None:
    actor = Slow()
    async with ActorSystem() as system:
        ref = system.spawn(actor)
        with pytest.raises(ActorStoppedError):
            await ref.ask(Swallow(), timeout=1.0)
        await ref.stop()
        assert actor.stopped
        assert not ref.is_alive
    assert _only_me_left()


async def test_spawn_rules() -> None:
    with pytest.raises(ConfigurationError):
        ActorSystem().spawn(Slow())  # not entered
    with pytest.raises(ConfigurationError):
        ActorSystem(drain_timeout=-1)
    async with ActorSystem() as system:
        first = system.spawn(Slow, name="x")
        assert first.name == "x"
        with pytest.raises(ConfigurationError):
            system.spawn(Slow(), name="x")
        with pytest.raises(ConfigurationError):
            system.spawn(Slow(), mailbox_size=0)
        await system.stop(first)
        assert system.spawn(Slow, name="x").is_alive  # a stopped actor's name is free again
        assert system.spawn(Slow()).name.startswith("Slow-")
    with pytest.raises(ConfigurationError):
        async with system:
            pass

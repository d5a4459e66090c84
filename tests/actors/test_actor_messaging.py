"""Tests of ``ActorRef``: tell, send, ask, ordering, timeouts, backpressure, stop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import assert_never

import pytest

from oma_actors.actors import Actor, ActorRef, ActorSystem
from oma_actors.errors import ActorStoppedError, AskTimeoutError, MailboxFullError

# A kernel bug tends to hang rather than fail; keep such a hang short.
pytestmark = pytest.mark.timeout(10)


@dataclass(frozen=True, slots=True)
class Item:
    sender: str
    seq: int


@dataclass(frozen=True, slots=True)
class Collected:
    pass


@dataclass(frozen=True, slots=True)
class Hold:
    """Block in ``receive`` until the test sets ``release``."""

    release: asyncio.Event


@dataclass(frozen=True, slots=True)
class RaiseTimeout:
    pass


@dataclass(frozen=True, slots=True)
class StopSelf:
    """Ask the actor to stop itself through its own ref."""

    ref: ActorRef[StopSelf]


Msg = Item | Collected | Hold | RaiseTimeout | StopSelf


@dataclass
class Recorder(Actor[Msg]):
    """Records every item; answers ``Collected`` with the record so far."""

    items: list[Item] = field(default_factory=list)
    active: int = 0
    max_active: int = 0
    stopped: bool = False

    async def receive(self, message: Msg) -> object:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            match message:
                case Item():
                    self.items.append(message)
                    await asyncio.sleep(0)  # give other asks a chance to overlap, if they could
                    return message.seq
                case Collected():
                    return list(self.items)
                case Hold(release=release):
                    await release.wait()
                    return "released"
                case RaiseTimeout():
                    raise TimeoutError("from receive")
                case StopSelf(ref=ref):
                    await ref.stop()  # from inside the actor: must not deadlock
                    return "stopping"
                case _:
                    assert_never(message)
        finally:
            self.active -= 1

    async def on_stop(self) -> None:
        self.stopped = True


async def test_tells_from_one_sender_are_processed_in_order() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder)
        for i in range(1000):
            ref.tell(Item("a", i))
        # The mailbox (size 1000) is full now, so this ask also exercises waiting for space.
        collected = await ref.ask(Collected())
    assert collected == [Item("a", i) for i in range(1000)]


async def test_each_sender_keeps_its_order_when_senders_interleave() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder, mailbox_size=4)

        async def sender(name: str) -> None:
            for i in range(200):
                await ref.send(Item(name, i))

        async with asyncio.TaskGroup() as tg:
            for name in ("a", "b", "c"):
                tg.create_task(sender(name))
        collected = await ref.ask(Collected())
    assert isinstance(collected, list)
    senders = [item.sender for item in collected]
    assert senders != sorted(senders)  # they really did interleave
    for name in ("a", "b", "c"):
        assert [item.seq for item in collected if item.sender == name] == list(range(200))


async def test_ask_returns_what_receive_returned() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder())
        assert await ref.ask(Item("a", 41)) == 41
        assert await ref.ask(Item("a", 42), timeout=1.0) == 42


async def test_the_actor_processes_one_message_at_a_time() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor)
        async with asyncio.TaskGroup() as tg:
            for i in range(20):
                tg.create_task(ref.ask(Item("a", i)))
    assert len(actor.items) == 20
    assert actor.max_active == 1


async def test_ask_timeout_raises_and_the_system_still_shuts_down_cleanly() -> None:
    actor = Recorder()
    async with ActorSystem(drain_timeout=0.05) as system:
        ref = system.spawn(actor)
        with pytest.raises(AskTimeoutError) as info:
            await ref.ask(Hold(asyncio.Event()), timeout=0.05)
        assert isinstance(info.value, TimeoutError)
        assert ref.name in str(info.value)
    assert actor.stopped
    assert not ref.is_alive
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_timed_out_message_is_still_processed() -> None:
    release = asyncio.Event()
    async with ActorSystem() as system:
        ref = system.spawn(Recorder)
        with pytest.raises(AskTimeoutError):
            await ref.ask(Hold(release), timeout=0.01)
        ref.tell(Item("late", 1))
        release.set()
        assert await ref.ask(Collected()) == [Item("late", 1)]


async def test_a_timeout_error_from_receive_is_not_an_ask_timeout() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder)
        with pytest.raises(TimeoutError, match="from receive") as info:
            await ref.ask(RaiseTimeout(), timeout=5.0)
        assert not isinstance(info.value, AskTimeoutError)


async def test_tell_send_and_ask_after_stop_raise_actor_stopped() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="gone")
        assert ref.is_alive
        await ref.stop()
        assert actor.stopped
        assert not ref.is_alive
        assert "gone" in repr(ref)
        with pytest.raises(ActorStoppedError):
            ref.tell(Item("a", 1))
        with pytest.raises(ActorStoppedError):
            await ref.send(Item("a", 1))
        with pytest.raises(ActorStoppedError):
            await ref.ask(Collected())
        await ref.stop()  # stopping twice is harmless


async def test_stop_lets_queued_messages_finish_first() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor)
        for i in range(5):
            ref.tell(Item("a", i))
        await system.stop(ref)
        assert [item.seq for item in actor.items] == [0, 1, 2, 3, 4]
        assert actor.stopped


async def test_an_actor_can_stop_itself() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor)
        # An ActorRef[Msg] is an ActorRef[StopSelf]: refs are contravariant in their message.
        assert await ref.ask(StopSelf(ref), timeout=1.0) == "stopping"
        await ref.stop()
        assert actor.stopped
        assert not ref.is_alive


async def test_tell_on_a_full_mailbox_raises_and_send_waits_for_space() -> None:
    release = asyncio.Event()
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, mailbox_size=2)
        ref.tell(Hold(release))
        await asyncio.sleep(0)  # the actor takes Hold out of the mailbox and blocks
        ref.tell(Item("a", 0))
        ref.tell(Item("a", 1))
        with pytest.raises(MailboxFullError):
            ref.tell(Item("a", 2))
        async with asyncio.TaskGroup() as tg:
            waiting = tg.create_task(ref.send(Item("a", 2)))
            await asyncio.sleep(0.01)
            assert not waiting.done()  # backpressure: no space yet
            release.set()
        assert await ref.ask(Collected()) == [Item("a", 0), Item("a", 1), Item("a", 2)]


async def test_cancelling_an_asker_propagates_the_cancellation() -> None:
    release = asyncio.Event()
    async with ActorSystem() as system:
        ref = system.spawn(Recorder)
        async with asyncio.TaskGroup() as tg:
            asker = tg.create_task(ref.ask(Hold(release)))
            await asyncio.sleep(0.01)
            asker.cancel()
        assert asker.cancelled()
        # The actor itself is unharmed and still answers.
        release.set()
        assert await ref.ask(Item("a", 3), timeout=1.0) == 3

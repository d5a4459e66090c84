"""Tests of the bounded, closable ``Mailbox``."""

from __future__ import annotations

import asyncio

import pytest

from oma_actors.actors import Mailbox
from oma_actors.errors import ActorStoppedError, ConfigurationError, MailboxFullError

# A kernel bug tends to hang rather than fail; keep such a hang short.
pytestmark = pytest.mark.timeout(10)


async def test_items_come_out_in_the_order_they_went_in() -> None:
    mailbox: Mailbox[int] = Mailbox(10)
    for i in range(5):
        mailbox.put_nowait(i)
    assert len(mailbox) == 5
    assert [await mailbox.get() for _ in range(5)] == [0, 1, 2, 3, 4]


def test_size_must_be_positive() -> None:
    with pytest.raises(ConfigurationError):
        Mailbox[int](0)


async def test_put_nowait_on_a_full_mailbox_raises_mailbox_full() -> None:
    mailbox: Mailbox[int] = Mailbox(2)
    mailbox.put_nowait(1)
    mailbox.put_nowait(2)
    assert mailbox.full()
    with pytest.raises(MailboxFullError):
        mailbox.put_nowait(3)
    assert len(mailbox) == 2


async def test_put_waits_for_space_then_completes() -> None:
    mailbox: Mailbox[int] = Mailbox(1)
    mailbox.put_nowait(1)
    async with asyncio.TaskGroup() as tg:
        putter = tg.create_task(mailbox.put(2))
        await asyncio.sleep(0)
        assert not putter.done()  # blocked: the mailbox is full
        assert await mailbox.get() == 1
    assert putter.done()
    assert await mailbox.get() == 2


async def test_get_waits_for_an_item() -> None:
    mailbox: Mailbox[str] = Mailbox(1)
    async with asyncio.TaskGroup() as tg:
        getter = tg.create_task(mailbox.get())
        await asyncio.sleep(0)
        assert not getter.done()
        mailbox.put_nowait("hello")
    assert getter.result() == "hello"


async def test_close_refuses_new_items_but_queued_ones_drain() -> None:
    mailbox: Mailbox[int] = Mailbox(5)
    mailbox.put_nowait(1)
    mailbox.put_nowait(2)
    mailbox.close()
    assert mailbox.closed
    with pytest.raises(ActorStoppedError):
        mailbox.put_nowait(3)
    with pytest.raises(ActorStoppedError):
        await mailbox.put(3)
    assert await mailbox.get() == 1
    assert await mailbox.get() == 2
    with pytest.raises(ActorStoppedError):
        await mailbox.get()
    mailbox.close()  # idempotent


async def test_close_wakes_a_waiting_getter_and_putter() -> None:
    empty: Mailbox[int] = Mailbox(1)
    full: Mailbox[int] = Mailbox(1)
    full.put_nowait(0)
    results: list[str] = []

    async def get_one() -> None:
        try:
            await empty.get()
        except ActorStoppedError:
            results.append("getter stopped")

    async def put_one() -> None:
        try:
            await full.put(1)
        except ActorStoppedError:
            results.append("putter stopped")

    async with asyncio.TaskGroup() as tg:
        tg.create_task(get_one())
        tg.create_task(put_one())
        await asyncio.sleep(0)
        assert results == []
        empty.close()
        full.close()
    assert sorted(results) == ["getter stopped", "putter stopped"]
    assert await full.get() == 0  # what was queued before close survives


async def test_a_cancelled_putter_does_not_block_the_next_one() -> None:
    mailbox: Mailbox[int] = Mailbox(1)
    mailbox.put_nowait(0)
    async with asyncio.TaskGroup() as tg:
        first = tg.create_task(mailbox.put(1))
        second = tg.create_task(mailbox.put(2))
        await asyncio.sleep(0)
        # Free a slot (which wakes ``first``) and cancel ``first`` before it runs: the slot
        # must be handed on to ``second``.
        assert await mailbox.get() == 0
        first.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert second.done()
    assert first.cancelled()
    assert await mailbox.get() == 2


async def test_a_cancelled_getter_leaves_no_stale_waiter() -> None:
    mailbox: Mailbox[int] = Mailbox(2)
    async with asyncio.TaskGroup() as tg:
        first = tg.create_task(mailbox.get())
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        second = tg.create_task(mailbox.get())
        await asyncio.sleep(0)
        mailbox.put_nowait(7)
    assert first.cancelled()
    assert second.result() == 7


async def test_drain_nowait_returns_and_removes_everything() -> None:
    mailbox: Mailbox[int] = Mailbox(5)
    for i in range(3):
        mailbox.put_nowait(i)
    mailbox.close()
    assert mailbox.drain_nowait() == [0, 1, 2]
    assert len(mailbox) == 0
    assert mailbox.drain_nowait() == []

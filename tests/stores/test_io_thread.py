"""``IoThread``: blocking calls on one thread of their own, in order, answered on the loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from oma_actors.stores.io_thread import IoThread


async def test_results_and_errors_come_back_on_the_loop() -> None:
    thread = IoThread("t")
    assert await thread.submit(lambda a, b: a + b, 2, 3) == 5

    def fails() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        await thread.submit(fails)
    # The error did not end the thread's service.
    assert await thread.submit(threading.get_ident) != threading.get_ident()


async def test_call_hands_the_outcome_to_its_answer_on_the_loop_without_a_future() -> None:
    thread = IoThread("t")
    loop = asyncio.get_running_loop()
    answered: asyncio.Queue[tuple[object, BaseException | None, int]] = asyncio.Queue()

    def answer(result: object, error: BaseException | None) -> None:
        answered.put_nowait((result, error, threading.get_ident()))

    def fails() -> None:
        raise OSError("disk full")

    thread.call(lambda a, b: a + b, (2, 3), answer)
    thread.call(fails, (), answer)
    result, error, ident = await answered.get()
    assert (result, error) == (5, None)
    assert ident == threading.get_ident()  # on the loop's thread, not the I/O thread
    result, error, _ = await answered.get()
    assert result is None
    assert isinstance(error, OSError)
    assert loop.is_running()
    await thread.close()


async def test_calls_run_in_the_order_they_were_handed_over_on_one_thread() -> None:
    thread = IoThread("t")
    seen: list[tuple[int, int]] = []

    def record(i: int) -> None:
        time.sleep(0.001 if i % 2 else 0)  # an early slow call must not be overtaken
        seen.append((i, threading.get_ident()))

    await asyncio.gather(*(thread.submit(record, i) for i in range(20)))
    assert [i for i, _ in seen] == list(range(20))
    assert len({ident for _, ident in seen}) == 1


async def test_the_thread_ends_when_idle_and_a_later_call_starts_another() -> None:
    thread = IoThread("t", idle_seconds=0.05)
    first = await thread.submit(threading.get_ident)
    for _ in range(200):
        if not thread.alive:
            break
        await asyncio.sleep(0.01)
    assert not thread.alive
    assert not any(t.ident == first for t in threading.enumerate())
    assert await thread.submit(lambda: 7) == 7
    assert thread.alive


async def test_a_cancelled_call_still_runs_and_the_next_one_is_answered() -> None:
    thread = IoThread("t")
    ran = threading.Event()

    def slow() -> None:
        time.sleep(0.05)
        ran.set()

    doomed = thread.submit(slow)
    doomed.cancel()
    assert await thread.submit(lambda: "next") == "next"
    assert ran.is_set()  # a write under way is never cut off by a cancelled waiter


def test_a_call_whose_loop_closed_does_not_stop_the_thread() -> None:
    thread = IoThread("t")
    gate = threading.Event()
    loop = asyncio.new_event_loop()

    async def hand_over() -> None:
        thread.submit(gate.wait)

    loop.run_until_complete(hand_over())
    loop.close()  # the answer to the call above has nowhere to go
    gate.set()

    async def later() -> int:
        return await thread.submit(lambda: 1)

    assert asyncio.run(later()) == 1

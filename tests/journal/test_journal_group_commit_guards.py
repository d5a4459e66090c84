"""``GroupCommit`` (the SQL journals' and the marks file's batching, D6/D15): no appender waits
forever, and one commit runs at a time.

Each test holds one guard of ``batching.py`` that no journal test reaches: a commit that answers
the wrong number of items, a cancelled appender in a committing batch, a batch committed while
the previous one is still committing, and ``abort`` with a batch still gathering.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from oma_actors.journal.batching import GroupCommit

if TYPE_CHECKING:
    from collections.abc import Sequence


async def test_a_commit_answering_the_wrong_number_of_items_fails_every_item() -> None:
    """Guards the length check after ``commit``: a backend answering one result for two items
    fails both with a ``RuntimeError`` instead of leaving their appenders waiting forever."""

    async def one_answer(items: Sequence[int]) -> list[int | BaseException]:
        return [0]

    batching: GroupCommit[int, int] = GroupCommit(one_answer, window_s=0)
    async with asyncio.timeout(5):
        results = await asyncio.gather(
            batching.submit(1), batching.submit(2), return_exceptions=True
        )
    assert [type(r) for r in results] == [RuntimeError, RuntimeError]
    assert "commit answered 1 of 2 items" in str(results[0])


async def test_a_cancelled_appender_does_not_strand_the_rest_of_its_batch() -> None:
    """Guards ``_settle``'s skip of a future already done: an appender cancelled while its
    batch commits has a cancelled future, and settling it must not raise before the other
    appenders of the batch get their results."""
    gate = asyncio.Event()

    async def gated(items: Sequence[int]) -> list[int | BaseException]:
        await gate.wait()
        return list(items)

    batching: GroupCommit[int, int] = GroupCommit(gated, window_s=0)
    doomed = asyncio.create_task(batching.submit(1))
    kept = asyncio.create_task(batching.submit(2))
    for _ in range(5):  # both items are in the batch being committed
        await asyncio.sleep(0)
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    gate.set()
    async with asyncio.timeout(5):
        assert await kept == 2
    assert batching.batches == 1


async def test_a_batch_is_committed_only_after_the_previous_commit_ended() -> None:
    """Guards the commit lock in ``_flush_after``: items arriving while a batch commits form
    the next batch, which commits after it; two transactions of one journal never overlap (the
    rows of later appends would land before earlier ones')."""
    first_in, first_out = asyncio.Event(), asyncio.Event()
    batches: list[list[int]] = []
    active = peak = 0

    async def commit(items: Sequence[int]) -> list[int | BaseException]:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        batches.append(list(items))
        if items[0] == 1:
            first_in.set()
            await first_out.wait()
        active -= 1
        return list(items)

    batching: GroupCommit[int, int] = GroupCommit(commit, window_s=0)
    first = asyncio.create_task(batching.submit(1))
    await first_in.wait()
    later = [asyncio.create_task(batching.submit(n, now=True)) for n in (2, 3)]
    await asyncio.sleep(0.05)
    assert batches == [[1]]  # the next batch waits for the commit under way
    first_out.set()
    async with asyncio.timeout(5):
        assert [await first, *[await task for task in later]] == [1, 2, 3]
    assert batches == [[1], [2, 3]]
    assert peak == 1


async def test_abort_cancels_the_items_of_a_batch_still_gathering() -> None:
    """Guards ``abort``'s ``finally``: items no commit took (their window was still open when
    the flusher was cancelled) have their futures cancelled, so no appender waits forever."""
    committed: list[list[int]] = []

    async def commit(items: Sequence[int]) -> list[int | BaseException]:
        committed.append(list(items))
        return list(items)

    batching: GroupCommit[int, int] = GroupCommit(commit, window_s=60)
    future = batching.enqueue(1)
    await asyncio.sleep(0)  # the flusher is waiting out the window
    async with asyncio.timeout(5):
        await batching.abort()
    assert future.cancelled()
    assert committed == []


async def test_an_item_submitted_now_does_not_wait_out_the_window() -> None:
    """Guards ``enqueue``'s ``now``: a durable run's append closes the batch's window at once
    (``append_now``), so it never waits out a batching window (here an hour long); a later
    item of the same loop turn rides in its batch. Without ``now`` nothing commits at all."""
    committed: list[list[int]] = []

    async def commit(items: Sequence[int]) -> list[int | BaseException]:
        committed.append(list(items))
        return list(items)

    batching: GroupCommit[int, int] = GroupCommit(commit, window_s=3600)
    waiting = batching.enqueue(1)
    at_once = batching.enqueue(2, now=True)
    for _ in range(5):  # a few loop turns, not a wall-clock wait
        await asyncio.sleep(0)
    assert at_once.done()
    assert waiting.done()
    assert committed == [[1, 2]]
    alone = batching.enqueue(3)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not alone.done()  # without ``now`` an item waits for its window
    await batching.drain()
    assert committed == [[1, 2], [3]]

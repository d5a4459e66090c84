"""The sweep loop behind failover and retention: a failing pass is logged and retried, the first
pass waits or not as asked, and cancellation (the server's shutdown) always propagates."""

from __future__ import annotations

import asyncio
import logging

import pytest

from sidecar.sweeps import sweep_forever


async def test_a_failing_sweep_is_logged_and_the_next_one_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    passes = 0
    third = asyncio.Event()

    async def sweep() -> None:
        nonlocal passes
        passes += 1
        if passes == 3:
            third.set()
        if passes == 1:
            raise RuntimeError("store hiccup")

    with caplog.at_level(logging.ERROR, logger="sidecar.sweeps"):
        task = asyncio.create_task(sweep_forever(sweep, interval=0, what="demo", at_once=True))
        await asyncio.wait_for(third.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert [r.getMessage() for r in caplog.records] == ["demo sweep failed"]


@pytest.mark.parametrize("at_once", [True, False])
async def test_the_first_pass_runs_at_once_only_when_asked(at_once: bool) -> None:
    passes = 0

    async def sweep() -> None:
        nonlocal passes
        passes += 1

    task = asyncio.create_task(sweep_forever(sweep, interval=3600, what="demo", at_once=at_once))
    for _ in range(5):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert passes == (1 if at_once else 0)


async def test_cancellation_inside_a_sweep_propagates() -> None:
    started = asyncio.Event()

    async def sweep() -> None:
        started.set()
        await asyncio.sleep(3600)

    task = asyncio.create_task(sweep_forever(sweep, interval=0, what="demo", at_once=True))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

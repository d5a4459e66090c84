"""Unit tests of ``sidecar.claims``: one claim per run at a time in a process, none kept after."""

from __future__ import annotations

import asyncio

from sidecar.claims import Claims


async def test_claims_of_one_run_take_turns_and_others_do_not_wait() -> None:
    claims = Claims()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def claim(run_id: str, name: str, *, hold: bool = False) -> None:
        async with claims.held(run_id):
            order.append(f"{name} in")
            if hold:
                first_in.set()
                await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(claim("r1", "a", hold=True))
    await first_in.wait()
    second = asyncio.create_task(claim("r1", "b"))
    await claim("r2", "c")  # another run's claim is not held up
    await asyncio.sleep(0)
    assert order == ["a in", "c in", "c out"]
    release.set()
    await asyncio.gather(first, second)
    assert order == ["a in", "c in", "c out", "a out", "b in", "b out"]
    assert len(claims) == 0  # nothing kept for runs nobody claims


async def test_a_claim_that_raises_gives_its_turn_back() -> None:
    claims = Claims()
    try:
        async with claims.held("r1"):
            raise RuntimeError("refused")
    except RuntimeError:
        pass
    async with asyncio.timeout(1):
        async with claims.held("r1"):
            pass
    assert len(claims) == 0

"""BENCH.md P7: an ask/reply round trip through the actor kernel vs a bare asyncio.Queue ping-pong.

Both sides run in the same process and the same run, on uvloop (when installed) and on asyncio's
default loop. Each repeat measures every variant once, in an order that rotates between repeats,
and the table reports the median per round trip. The goal is a kernel/queue ratio of at most 2x.

Variants:

* ``queue``: two ``asyncio.Queue(maxsize=1000)`` and a responder task; one round trip is
  ``put`` a request, then ``get`` the reply.
* ``ask``: ``await ref.ask(Ping(i))`` on an echo actor (mailbox size 1000, no timeout).
* ``ask+timeout``: the same with ``timeout=10.0``, which adds ``asyncio.timeout()``'s timer.

Run: ``.venv/bin/python bench/actors.py [--n 20000] [--repeats 7] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path

from oma_actors.actors import Actor, ActorSystem, event_loop_factory

GOAL = 2.0
MAILBOX_SIZE = 1000
WARMUP = 500


@dataclass(frozen=True, slots=True)
class Ping:
    n: int


class Echo(Actor[Ping]):
    async def receive(self, message: Ping) -> object:
        return message.n


async def queue_round_trip(n: int) -> float:
    """Seconds per round trip of a bare two-queue ping-pong."""
    requests: asyncio.Queue[Ping | None] = asyncio.Queue(MAILBOX_SIZE)
    replies: asyncio.Queue[int] = asyncio.Queue(MAILBOX_SIZE)

    async def responder() -> None:
        while (request := await requests.get()) is not None:
            await replies.put(request.n)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(responder())
        for i in range(WARMUP):
            await requests.put(Ping(i))
            await replies.get()
        start = time.perf_counter()
        for i in range(n):
            await requests.put(Ping(i))
            await replies.get()
        elapsed = time.perf_counter() - start
        await requests.put(None)
    return elapsed / n


async def _ask_round_trip(n: int, ask_timeout: float | None) -> float:
    async with ActorSystem() as system:
        ref = system.spawn(Echo, mailbox_size=MAILBOX_SIZE)
        for i in range(WARMUP):
            await ref.ask(Ping(i), timeout=ask_timeout)
        start = time.perf_counter()
        for i in range(n):
            await ref.ask(Ping(i), timeout=ask_timeout)
        elapsed = time.perf_counter() - start
    return elapsed / n


async def ask_round_trip(n: int) -> float:
    """Seconds per ``ask`` round trip through the kernel, without a timeout."""
    return await _ask_round_trip(n, None)


async def ask_timeout_round_trip(n: int) -> float:
    """Seconds per ``ask`` round trip through the kernel, with ``timeout=10.0``."""
    return await _ask_round_trip(n, 10.0)


VARIANTS: dict[str, Callable[[int], Coroutine[object, None, float]]] = {
    "queue": queue_round_trip,
    "ask": ask_round_trip,
    "ask+timeout": ask_timeout_round_trip,
}


def measure(
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None, n: int, repeats: int
) -> dict[str, list[float]]:
    """Run every variant ``repeats`` times, interleaved, on one loop; microseconds per trip."""
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    names = list(VARIANTS)
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        for repeat in range(repeats):
            # Rotate the order so no variant always runs first (or last) in a repeat.
            shift = repeat % len(names)
            for name in names[shift:] + names[:shift]:
                gc.collect()
                seconds = runner.run(VARIANTS[name](n))
                samples[name].append(seconds * 1e6)
    return samples


def summarize(samples: dict[str, list[float]]) -> dict[str, float]:
    """Medians per variant and the two ratios against the bare queue."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "queue_us": medians["queue"],
        "ask_us": medians["ask"],
        "ask_timeout_us": medians["ask+timeout"],
        "ratio": medians["ask"] / medians["queue"],
        "ratio_timeout": medians["ask+timeout"] / medians["queue"],
    }


def print_table(results: dict[str, dict[str, float]], n: int, repeats: int) -> None:
    """One table: a row per event loop."""
    title = f"P7 ask/reply vs asyncio.Queue ping-pong (n={n}, median of {repeats}, goal <= {GOAL}x)"
    header = ("loop", "queue us/trip", "ask us/trip", "ratio", "ask+timeout us", "ratio", "goal")
    rows = [
        (
            loop,
            f"{r['queue_us']:.2f}",
            f"{r['ask_us']:.2f}",
            f"{r['ratio']:.2f}x",
            f"{r['ask_timeout_us']:.2f}",
            f"{r['ratio_timeout']:.2f}x",
            "met" if r["ratio"] <= GOAL else "MISSED",
        )
        for loop, r in results.items()
    ]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        for row in (header, *rows):
            print("  ".join(f"{cell:>15}" for cell in row))
        return
    table = Table(title=title)
    for column in header:
        table.add_column(column, justify="left" if column == "loop" else "right")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0 (the goal is reported, not enforced)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=20_000, help="round trips per sample")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved repeats (>= 5)")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    loops: dict[str, Callable[[], asyncio.AbstractEventLoop] | None] = {}
    uvloop_factory = event_loop_factory()
    if uvloop_factory is not None:
        loops["uvloop"] = uvloop_factory
    loops["asyncio"] = None
    raw = {name: measure(factory, args.n, args.repeats) for name, factory in loops.items()}
    results = {name: summarize(samples) for name, samples in raw.items()}
    print_table(results, args.n, args.repeats)
    if args.json is not None:
        payload = {
            "benchmark": "P7",
            "goal_ratio": GOAL,
            "n": args.n,
            "repeats": args.repeats,
            "python": sys.version.split()[0],
            "results": {name: {**results[name], "samples_us": raw[name]} for name in results},
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``list(prefix=)`` against ``list()`` and a filter, per store backend, side by side.

A store holds ``--unrelated`` keys that a listing of run records does not want (checkpoints and
journal rows, ``--value`` bytes each) and ``--wanted`` run records under ``__oma_run__/``. Per
backend, the two ways to list the run records take turns round by round (order shuffled per
round, so neither always runs first); the table shows the median of each and their ratio:

* **prefix**: ``store.list(prefix="__oma_run__/")`` (SQLite and PostgreSQL: a range scan on a
  key index; Redis: filtered inside its script; memory and file: a filter in the process).
* **scan+filter**: ``store.list()``, then ``key.startswith`` in Python (what the run and
  checkpoint listings did before).

Run: ``.venv/bin/python bench/store_prefix.py [--quick] [--json PATH]``. PostgreSQL and Redis
are used when reachable (``OMA_TEST_POSTGRES_DSN``, ``OMA_TEST_REDIS_URL``, or this machine's);
a backend that cannot be used is reported as skipped. Tables, keys and files are removed after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from checkpoint import git_revision, loadavg
from checkpoint_report import fmt_ratio, fmt_time, median, table

from oma_actors.keyspace import RUN_KEY_PREFIX
from oma_actors.stores import FileStore, InMemoryStore, Put, SqliteStore
from oma_actors.stores.base import ConditionalStore

POSTGRES_DSN = os.environ.get("OMA_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("OMA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
BATCH = 1000
Opener = Callable[[Path], contextlib.AbstractAsyncContextManager[ConditionalStore]]


@contextlib.asynccontextmanager
async def _memory(_: Path) -> AsyncIterator[ConditionalStore]:
    yield InMemoryStore()


@contextlib.asynccontextmanager
async def _file(folder: Path) -> AsyncIterator[ConditionalStore]:
    yield FileStore(folder / "state.json")


@contextlib.asynccontextmanager
async def _sqlite(folder: Path) -> AsyncIterator[ConditionalStore]:
    async with SqliteStore(folder / "state.db") as store:
        yield store


@contextlib.asynccontextmanager
async def _postgres(_: Path) -> AsyncIterator[ConditionalStore]:
    import asyncpg

    from oma_actors.stores.postgres import PostgresStore

    table = f"oma_bench_{uuid.uuid4().hex[:12]}"
    try:
        async with PostgresStore(POSTGRES_DSN, table=table, connect_timeout=5) as store:
            yield store
    finally:
        with contextlib.suppress(OSError, asyncpg.PostgresError):
            connection = await asyncpg.connect(POSTGRES_DSN, timeout=5)
            try:
                await connection.execute(f'DROP TABLE IF EXISTS "{table}"')
            finally:
                await connection.close()


@contextlib.asynccontextmanager
async def _redis(_: Path) -> AsyncIterator[ConditionalStore]:
    from oma_actors.stores.redis import RedisStore

    async with RedisStore(REDIS_URL, prefix=f"oma-bench:{uuid.uuid4().hex[:12]}:") as store:
        try:
            yield store
        finally:
            await store.clear()


BACKENDS: dict[str, Opener] = {
    "memory": _memory,
    "file": _file,
    "sqlite": _sqlite,
    "postgres": _postgres,
    "redis": _redis,
}


async def fill(store: ConditionalStore, unrelated: int, wanted: int, value: int) -> list[str]:
    """Write the keys, run records spread among them; the run-record keys in store order."""
    rng = random.Random(7)
    keys = [f"__oma_checkpoint__/run-{i:05d}" for i in range(unrelated // 2)]
    keys += [f"__oma_journal__/run-{i:05d}/{i % 97}" for i in range(unrelated - len(keys))]
    rng.shuffle(keys)
    records = [f"{RUN_KEY_PREFIX}run-{i:05d}" for i in range(wanted)]
    for n, record in enumerate(records):
        keys.insert((n + 1) * len(keys) // (wanted + 1), record)
    payload = "x" * value
    for start in range(0, len(keys), BATCH):
        await store.apply([], [Put(k, payload) for k in keys[start : start + BATCH]])
    return [k for k in keys if k.startswith(RUN_KEY_PREFIX)]


async def compare(store: ConditionalStore, rounds: int, want: list[str]) -> dict[str, float]:
    """Median seconds of each way to list the run records, over interleaved rounds."""

    async def by_prefix() -> list[str]:
        return [e.key for e in await store.list(prefix=RUN_KEY_PREFIX)]

    async def scan_and_filter() -> list[str]:
        return [e.key for e in await store.list() if e.key.startswith(RUN_KEY_PREFIX)]

    ops: dict[str, Callable[[], Awaitable[list[str]]]] = {
        "prefix": by_prefix,
        "scan+filter": scan_and_filter,
    }
    for name, op in ops.items():  # warm, and both must list exactly the run records
        got = await op()
        if got != want:
            raise SystemExit(f"{name} listed {len(got)} keys, expected {len(want)}")
    times: dict[str, list[float]] = {name: [] for name in ops}
    for i in range(rounds):
        for name in random.Random(i).sample(list(ops), len(ops)):
            t0 = time.perf_counter()
            await ops[name]()
            times[name].append(time.perf_counter() - t0)
    return {name: median(ts) for name, ts in times.items()}


async def main() -> None:
    """Parse the flags, run every backend, print the table (and write JSON if asked)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--unrelated", type=int, default=10_000, help="keys not listed")
    parser.add_argument("--wanted", type=int, default=20, help="run records listed")
    parser.add_argument("--value", type=int, default=256, help="bytes per value")
    parser.add_argument("--rounds", type=int, default=31, help="interleaved rounds")
    parser.add_argument("--only", choices=list(BACKENDS), action="append", help="backends")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    rounds = 7 if args.quick else args.rounds
    print(f"# list(prefix=) vs list()+filter; git {git_revision()}; load {loadavg()}")
    print(
        f"{args.unrelated:,} unrelated keys + {args.wanted} run records, {args.value} B values,"
        f" median of {rounds} interleaved rounds\n"
    )
    rows: list[list[str]] = []
    results: dict[str, Any] = {}
    for name in args.only or list(BACKENDS):
        with tempfile.TemporaryDirectory(prefix="oma-bench-prefix-") as folder:
            try:
                async with BACKENDS[name](Path(folder)) as store:
                    want = await fill(store, args.unrelated, args.wanted, args.value)
                    medians = await compare(store, rounds, want)
            except Exception as exc:  # a backend that cannot run is reported, not fatal
                rows.append([name, "-", "-", f"skipped: {type(exc).__name__}: {exc}"[:80]])
                continue
        ratio = medians["scan+filter"] / medians["prefix"]
        results[name] = {**medians, "speedup": ratio}
        rows.append(
            [name, fmt_time(medians["prefix"]), fmt_time(medians["scan+filter"]), fmt_ratio(ratio)]
        )
    print(table(["store", "list(prefix=)", "list() + filter", "speed-up"], rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": None}, **results}))


if __name__ == "__main__":
    asyncio.run(main())

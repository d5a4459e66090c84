"""P12: the time a PostgreSQL store adds per durable boundary, vs a bare upsert of the same bytes.

The payloads are the real snapshots of the scripted workload (``checkpoint_workload.py``)
closest to 2 KiB, 64 KiB and 1 MiB. The variants take turns save by save (shuffled, so none
always follows the same other), each on its own key; tables show medians of repeat medians:

* **floor**: ``INSERT ... ON CONFLICT (key) DO UPDATE`` of the snapshot text, one statement in
  autocommit on a held asyncpg connection (one round trip, and its commit flushes the WAL).
* the **real path**: ``RunWriter.save`` on a ``PostgresStore`` (stamp the revision, encode with
  the writer's cache, ``Checkpoint.write_encoded`` -> ``PostgresStore.set``), without and with a
  run lease (``fence=``: one ``apply`` with the record check, the record's move and the snapshot);
  and ``Checkpoint.write_encoded`` alone, the store without the encoding.
* **where the time goes**: the floor plus what ``PostgresStore.set`` adds, one step at a time
  (BEGIN/COMMIT, the advisory lock, a pool connection released with asyncpg's reset query or
  without), the lock folded into the upsert (what a one-round-trip ``set`` could cost), a
  ``SELECT 1`` round trip, and ``RunWriter.save`` on an ``InMemoryStore`` (its CPU cost).

Run: ``.venv/bin/python bench/store_postgres.py [--quick] [--json PATH] [--dsn DSN]``; without
a reachable PostgreSQL it says why and exits 0. Its tables get random names and are dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import random
import time
import uuid
from argparse import RawDescriptionHelpFormatter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import asyncpg
from checkpoint import git_revision, loadavg
from checkpoint_report import KIB, fmt_bytes, fmt_ratio, fmt_time, median, table, verdict
from checkpoint_workload import RUN_ID, Trace, bench_agent, bench_task

from oma_actors import CheckpointOptions, OpenMultiAgent, Team
from oma_actors.actors import event_loop_factory
from oma_actors.checkpoint import Checkpoint, CheckpointSnapshot, decode, encode
from oma_actors.checkpoint.run_writer import RunWriter
from oma_actors.keyspace import CHECKPOINT_KEY_PREFIX
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import InMemoryStore
from oma_actors.stores.postgres import PostgresStore
from oma_actors.stores.rows import redact

GOAL = 1.5  # P12: PostgreSQL store per boundary / bare upsert + commit, at most
SIZES = (2 * KIB, 64 * KIB, 1024 * KIB)
DEFAULT_DSN = os.environ.get(
    "OMA_BENCH_POSTGRES_DSN",
    os.environ.get("OMA_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
)
Op = Callable[[str], Awaitable[Any]]
Texts = Callable[[int], str]
UPSERT = 'INSERT INTO "{}" (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = $2'
"""The floor's statement, on a two-column table (``.format(table)``)."""


class _Closest(InMemoryStore):
    """An InMemoryStore that keeps, per target size, the checkpoint value closest to it."""

    def __init__(self, targets: Sequence[int]) -> None:
        super().__init__()
        self.best: dict[int, tuple[int, str]] = {t: (-1, "") for t in targets}

    async def set(self, key: str, value: str, metadata: Any = None) -> None:
        await super().set(key, value, metadata)
        if key.startswith(CHECKPOINT_KEY_PREFIX):
            n = len(value.encode())
            for t, (m, _) in self.best.items():
                if m < 0 or abs(math.log(n / t)) < abs(math.log(m / t)):
                    self.best[t] = (n, value)


async def real_snapshots(targets: Sequence[int], payload: int) -> dict[int, CheckpointSnapshot]:
    """Run the workload; per target, the real snapshot closest to it (by ratio of sizes)."""
    store = _Closest(targets)
    turns = max(targets) // (3 * payload) + 10  # a turn adds about 3.5 payloads of snapshot
    options = CheckpointOptions(store=store, run_id=RUN_ID)
    team = Team("bench", [bench_agent(turns, payload, Trace())])
    await OpenMultiAgent().run_tasks(team, [bench_task()], checkpoint=options)
    return {t: decode(text, key="bench") for t, (_, text) in store.best.items()}


def revisions(snap: CheckpointSnapshot) -> Texts:
    """Round ``i``'s text: ``snap`` encoded at revision 1000000 + i (so the length stays put)."""
    return lambda i: encode(replace(snap, revision=1_000_000 + i))


async def probe(dsn: str) -> tuple[bool, str]:
    """``(True, the server's version and commit settings)``, or ``(False, why not)``."""
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        return False, f"PostgreSQL at {redact(dsn)} cannot be used ({type(exc).__name__}: {exc})"
    try:
        names = ("server_version", "synchronous_commit", "fsync", "wal_sync_method")
        values = [await conn.fetchval(f"SHOW {n}") for n in names]
    finally:
        await conn.close()
    return True, ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))


async def interleave(ops: dict[str, Op], n: int, texts: Texts) -> dict[str, float]:
    """Median seconds of each op over ``n`` rounds; a round runs each once, order shuffled.

    Round ``i`` gives every op ``texts(i)``, made before its timer starts: as in a running run,
    each write differs from the last (SQLite does not even write a page whose bytes are equal).
    """
    for op in ops.values():
        await op(texts(-1))  # warm: the key exists and the statement is prepared
    names = list(ops)
    ts: dict[str, list[float]] = {name: [] for name in names}
    for i in range(n):
        for name in random.Random(i).sample(names, len(names)):
            text = texts(i)
            t0 = time.perf_counter()
            await ops[name](text)
            ts[name].append(time.perf_counter() - t0)
    return {name: median(v) for name, v in ts.items()}


async def _no_reset(_connection: object) -> None:
    """A pool ``reset`` that skips asyncpg's reset query (nothing here outlives a transaction)."""


def ladder(conn: Any, pools: tuple[Any, Any], table: str) -> dict[str, Op]:
    """The floor, and the floor plus what ``PostgresStore.set`` adds, one step at a time."""
    sql = UPSERT.format(table)
    lock = "SELECT pg_advisory_xact_lock($1)"
    one = (
        f'WITH l AS (SELECT pg_advisory_xact_lock($3)) INSERT INTO "{table}" (key, value) '
        "SELECT $1, $2 FROM l ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
    )
    pool, bare_pool = pools

    async def tx(text: str) -> None:
        async with conn.transaction():
            await conn.execute(sql, "tx", text)

    async def tx_lock(text: str, c: Any = conn, key: str = "tx+lock") -> None:
        async with c.transaction():
            await c.executemany(lock, [(7,)])
            await c.execute(sql, key, text)

    def pooled(p: Any, key: str) -> Op:
        async def op(text: str) -> None:
            async with p.acquire() as c:
                await tx_lock(text, c, key)

        return op

    async def one_statement(text: str) -> None:
        async with bare_pool.acquire() as c:
            await c.execute(one, "one", text, 9)

    return {
        "floor": lambda text: conn.execute(sql, "floor", text),
        "+ BEGIN/COMMIT": tx,
        "+ advisory lock": tx_lock,
        "+ pool acquire/release": pooled(pool, "pool"),
        "same, no reset query": pooled(bare_pool, "bare pool"),
        "lock in the upsert, autocommit, no reset": one_statement,
        "SELECT 1": lambda _text: conn.fetchval("SELECT 1"),
    }


REAL = ("RunWriter.save", "RunWriter.save, fenced", "write_encoded -> set", "InMemory RunWriter")


def real_ops(store: PostgresStore, handle: Any, snap: CheckpointSnapshot) -> dict[str, Op]:
    """The real save paths: ``RunWriter.save`` unfenced, fenced and in memory; the bare store."""
    checkpoints = (
        Checkpoint(store, run_id="bench-w"),
        Checkpoint(store, run_id=handle.run_id),
        Checkpoint(InMemoryStore(), run_id="bench-m"),
    )
    fences = (None, handle, None)
    writers = {  # events are not what is measured: the writers drop them
        k: RunWriter(cp, emit=lambda _event: None, fence=fence)
        for k, cp, fence in zip((REAL[0], REAL[1], REAL[3]), checkpoints, fences, strict=True)
    }
    ops: dict[str, Op] = {
        k: (lambda _text, w=w: w.save(snap, boundary="tool_results")) for k, w in writers.items()
    }
    cp = Checkpoint(store, run_id="bench-set")
    ops[REAL[2]] = lambda text: cp.write_encoded(text, snap)
    return ops


async def sample(ops: dict[str, Op], n: int, texts: Texts, repeats: int) -> dict[str, list[float]]:
    """``repeats`` interleaved runs of ``ops`` (see ``interleave``): the medians of each."""
    rows: dict[str, list[float]] = {}
    for _ in range(repeats):
        gc.collect()
        for k, v in (await interleave(ops, n, texts)).items():
            rows.setdefault(k, []).append(v)
    return rows


async def measure(a: argparse.Namespace) -> dict[str, Any]:
    """Every variant at every size: the median of each repeat, per size and variant."""
    snaps = await real_snapshots(SIZES, KIB)
    name = f"oma_bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(a.dsn)
    out: dict[str, Any] = {"sizes": {}}
    await conn.execute(f'CREATE TABLE "{name}_floor" (key TEXT PRIMARY KEY, value TEXT NOT NULL)')
    try:
        pool = await asyncpg.create_pool(a.dsn, min_size=1, max_size=10)
        bare = await asyncpg.create_pool(a.dsn, min_size=1, max_size=10, reset=_no_reset)
        async with PostgresStore(a.dsn, table=name) as store, pool, bare:
            ledger = RunLedger(MemoryStoreRunStore(store, atomicity="cross-process"))
            handle = await ledger.acquire("bench-fenced", heartbeat=False)
            for size in SIZES:
                snap = replace(snaps[size], run_id=RUN_ID)
                ops = real_ops(store, handle, snap) | ladder(conn, (pool, bare), f"{name}_floor")
                texts = revisions(snap)
                rows = await sample(ops, a.saves[size], texts, a.repeats)
                out["sizes"][size] = {"bytes": len(texts(0).encode()), "repeats": rows}
            await handle.release()
    finally:
        await conn.execute(f'DROP TABLE IF EXISTS "{name}_floor"')
        await conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        await conn.close()
    return out


def report(res: dict[str, Any], a: argparse.Namespace) -> None:
    """Print P12's two tables: the real path vs the floor, and where the time goes."""
    print(
        f"\n## P12 PostgreSQL store: time per durable boundary vs a bare upsert + commit of the"
        f" same bytes (goal: <= {GOAL}x)\nmedian of {a.repeats} repeats, each the median of"
        f" {'/'.join(str(n) for n in a.saves.values())} saves interleaved save by save; floor ="
        " one INSERT ... ON CONFLICT DO UPDATE in autocommit on a held connection\n"
    )
    rows, ladder_rows = [], []
    for size, r in res["sizes"].items():
        med = {k: median(v) for k, v in r["repeats"].items()}
        floor = med["floor"]
        r["median_s"] = med
        r["over_floor"] = {k: v / floor for k, v in med.items()}
        row = [fmt_bytes(size), fmt_bytes(r["bytes"]), fmt_time(floor)]
        for k in REAL[:3]:
            row += [fmt_time(med[k]), fmt_ratio(med[k] / floor)]
        ratio = med[REAL[0]] / floor  # below the floor is a measurement error, not a pass
        rows.append([*row, "below the floor: noise" if ratio < 1.0 else verdict(ratio, GOAL)])
        ladder_rows.append(
            [fmt_bytes(r["bytes"])]
            + [f"{fmt_time(v)} ({fmt_ratio(v / floor)})" for k, v in med.items() if k not in REAL]
            + [fmt_time(med[REAL[3]])]
        )
        ladder_names = [k for k in med if k not in REAL]
    headers = ["target", "snapshot", "floor", "RunWriter.save", "x floor"]
    headers += ["fenced RunWriter.save", "x floor", "write_encoded -> set", "x floor", "verdict"]
    print(table(headers, rows))
    print(
        "\nWhere the time goes: the floor's statement plus what PostgresStore.set adds, one"
        " step at a time (each x floor), and the writer's CPU cost on an InMemoryStore\n"
    )
    print(table(["snapshot", *ladder_names, "InMemory RunWriter.save"], ladder_rows))


def cli(doc: str, title: str, figure: Callable[..., Any], report: Callable[..., None]) -> None:
    """The command line of this benchmark and of ``lease_overhead.py``: header, run, tables."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few saves: a smoke run of seconds")
    ap.add_argument("--repeats", type=int, default=0, help="interleaved repeats [5; quick 3]")
    ap.add_argument("--dsn", default=DEFAULT_DSN, help="PostgreSQL URI [%(default)s]")
    ap.add_argument("--json", default=None, help="also write every sample as JSON here")
    a = ap.parse_args()
    a.repeats = a.repeats or (3 if a.quick else 5)
    a.saves = dict(zip(SIZES, (20, 10, 4) if a.quick else (150, 80, 20), strict=True))
    started = time.perf_counter()
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        ok, info = runner.run(probe(a.dsn))
        if not ok:
            print(f"# {title}: skipped, {info}")
            return
        print(f"# {title}\n# date      {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
        print(f"# cpus      {os.cpu_count()}  loadavg(before) {loadavg()}")
        print(f"# revision  {git_revision()}\n# postgres  {redact(a.dsn)}: {info}")
        print(f"# settings  {'--quick ' if a.quick else ''}repeats={a.repeats} saves={a.saves}")
        res = runner.run(figure(a))
    res["server"] = info
    report(res, a)
    print(f"\n# total {time.perf_counter() - started:.0f} s, loadavg(after) {loadavg()}")
    if a.json:
        with open(a.json, "w") as handle:
            json.dump(res, handle, indent=1, default=str)


if __name__ == "__main__":
    cli(__doc__, "oma-actors PostgreSQL store benchmark (BENCH.md P12)", measure, report)

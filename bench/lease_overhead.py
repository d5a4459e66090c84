"""Run-lease overhead (issue 10, item 7): a lease renewal, and a fenced write vs an unfenced one.

Beside P12 (``store_postgres.py``), on a ``PostgresStore`` and a ``SqliteStore``, each with its
run records in the same store (``MemoryStoreRunStore(store, atomicity="cross-process")``, as the
orchestrator's D11 fenced writes need):

* **renew**: ``RunLeaseHandle.renew()`` (read the record, check the fence, compare-and-set the
  renewed record), vs the store's own ``set`` of the same record bytes and vs a bare upsert +
  commit of those bytes (PostgreSQL: one autocommit statement on a held asyncpg connection;
  SQLite: one autocommit statement on a raw ``sqlite3`` connection to the store's own file,
  WAL, ``synchronous=FULL``, in a worker thread, as the store does).
* **fenced write**: ``handle.fenced(apply, checkpoint_ref=...)`` whose ``apply`` adds the
  snapshot's ``Put`` to the fence's check and the record's move, one ``store.apply`` (exactly
  what ``RunWriter`` does on a fenced run), vs ``Checkpoint.write_encoded`` -> ``store.set`` of
  the same snapshot. The snapshots are P12's real ones (near 2 KiB, 64 KiB and 1 MiB). An
  ``InMemoryStore`` pair shows the fence's CPU cost alone.

All variants run interleaved, one call each per round in a shuffled order; the tables show the
median over the repeats of each repeat's median. Run: ``.venv/bin/python bench/lease_overhead.py
[--quick] [--json PATH] [--dsn DSN]``; without a reachable PostgreSQL it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sqlite3
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import asyncpg
from checkpoint_report import KIB, fmt_bytes, fmt_ratio, fmt_time, median, table
from checkpoint_workload import RUN_ID
from store_postgres import SIZES, UPSERT, Op, Texts, cli, real_snapshots, revisions, sample

from oma_actors.checkpoint import Checkpoint, encode
from oma_actors.runs import (
    DEFAULT_LEASE_TTL,
    MemoryStoreRunStore,
    RunLeaseHandle,
    RunLedger,
    RunRecord,
)
from oma_actors.runs.heartbeat import heartbeat_interval
from oma_actors.runs.store import record_put
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import Expect, Write
from oma_actors.stores.postgres import PostgresStore
from oma_actors.stores.sqlite import SqliteStore

STORES = ("PostgresStore", "SqliteStore", "InMemoryStore")


def fenced_op(store: Any, handle: RunLeaseHandle, snap: Any) -> Op:
    """A fenced snapshot write, built as ``RunWriter._write_fenced`` builds it."""
    cp = Checkpoint(store, run_id=handle.run_id)

    async def op(text: str) -> bool:
        put = cp.put(text, snap)
        ref = {"key": put.key, "snapshotVersion": snap.version, "savedAt": snap.created_at}

        async def apply(checks: list[Expect], writes: list[Write]) -> bool:
            return bool(await store.apply(checks, [*writes, put]))

        return await handle.fenced(apply, checkpoint_ref=ref)

    return op


def record_versions(record: RunRecord) -> Texts:
    """Round ``i``'s record text: ``record`` at version 10000 + i (each write differs)."""
    return lambda i: record_put(replace(record, version=10_000 + i)).value


def sqlite_floor(path: str, pool: ThreadPoolExecutor) -> tuple[Op, sqlite3.Connection]:
    """One autocommit upsert on a raw sqlite3 connection (WAL, FULL), in a worker thread."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS floor (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    sql = UPSERT.format("floor").replace("$", "?")  # ?1, ?2: numbered, as in PostgreSQL

    def write(text: str) -> None:
        conn.execute(sql, ("floor", text))

    return (lambda text: asyncio.get_running_loop().run_in_executor(pool, write, text)), conn


def fill_wal(path: str) -> None:
    """Cycle the WAL of the open database ``path`` once, so timed commits see a steady WAL.

    A long-running process overwrites a WAL that a checkpoint restarted; a new database appends
    to a growing one, whose fsyncs also journal its size and cost about twice as much. 1100
    one-page commits (unsynced) pass the 1000-page autocheckpoint.
    """
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("CREATE TABLE IF NOT EXISTS wal_fill (n INTEGER)")
        for i in range(1100):
            conn.execute("INSERT INTO wal_fill VALUES (?)", (i,))


async def measure(a: argparse.Namespace) -> dict[str, Any]:
    """Renewals, then fenced vs unfenced writes at every size, all interleaved."""
    dsn, saves, repeats, renews = a.dsn, a.saves, a.repeats, renews_of(a)
    snaps = await real_snapshots(SIZES, KIB)
    name = f"oma_bench_{uuid.uuid4().hex[:10]}"
    workdir = tempfile.mkdtemp(prefix="oma-leasebench-")
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE TABLE "{name}_floor" (key TEXT PRIMARY KEY, value TEXT NOT NULL)')
    pool = ThreadPoolExecutor(1, thread_name_prefix="sqlite-floor")
    lite_conn = None
    out: dict[str, Any] = {"renew": {}, "fenced": {}}
    try:
        async with (
            PostgresStore(dsn, table=name) as pg,
            SqliteStore(os.path.join(workdir, "store.db")) as lite,
        ):
            stores = dict(zip(STORES, (pg, lite, InMemoryStore()), strict=True))
            # The floor's table lives in the store's own file: one WAL, one file to fsync.
            lite_floor, lite_conn = sqlite_floor(lite.path, pool)
            fill_wal(lite.path)
            handles = {}
            for label, store in stores.items():
                atomicity = "process" if label == "InMemoryStore" else "cross-process"
                ledger = RunLedger(MemoryStoreRunStore(store, atomicity=atomicity), owner="bench")
                renewing = await ledger.acquire("bench-renew", heartbeat=False)
                fencing = await ledger.acquire("bench-fenced", heartbeat=False)
                handles[label] = (renewing, fencing)
            first = handles["PostgresStore"][0].record
            record = record_put(first)
            floors = {
                "PostgresStore": lambda t: conn.execute(UPSERT.format(f"{name}_floor"), "f", t),
                "SqliteStore": lite_floor,
            }
            ops: dict[str, Op] = {}
            for label in STORES:
                store, handle = stores[label], handles[label][0]
                ops[f"{label}|renew"] = lambda _t, h=handle: h.renew()
                ops[f"{label}|set"] = lambda t, s=store: s.set("copy", t, record.metadata)
                if label in floors:
                    ops[f"{label}|floor"] = floors[label]
            out["renew"] = await sample(ops, renews, record_versions(first), repeats)
            for size in SIZES:
                snap = replace(snaps[size], run_id=RUN_ID)
                ops = {}
                for label, store in stores.items():
                    cp = Checkpoint(store, run_id="bench-unfenced")
                    ops[f"{label}|set"] = lambda t, cp=cp, s=snap: cp.write_encoded(t, s)
                    ops[f"{label}|fenced"] = fenced_op(store, handles[label][1], snap)
                rows = await sample(ops, saves[size], revisions(snap), repeats)
                out["fenced"][size] = {"bytes": len(encode(snap).encode()), "repeats": rows}
            for renewing, fencing in handles.values():
                await renewing.release()
                await fencing.release()
    finally:
        if lite_conn is not None:
            pool.submit(lite_conn.close).result()
        pool.shutdown()
        await conn.execute(f'DROP TABLE IF EXISTS "{name}_floor"')
        await conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        await conn.close()
        for file in os.listdir(workdir):
            os.remove(os.path.join(workdir, file))
        os.rmdir(workdir)
    out["record_bytes"] = len(record.value.encode())
    return out


def renews_of(a: argparse.Namespace) -> int:
    """Renewals per repeat."""
    return 20 if a.quick else 200


def report(res: dict[str, Any], a: argparse.Namespace) -> None:
    """Print the renewal table and the fenced-write table."""
    repeats, renews, saves = a.repeats, renews_of(a), a.saves
    every = heartbeat_interval(round(DEFAULT_LEASE_TTL * 1000))
    print(
        f"\n## Lease renewal: RunLeaseHandle.renew() ({fmt_bytes(res['record_bytes'])} record)"
        f"\nmedian of {repeats} repeats, each the median of {renews} calls, interleaved call by"
        f" call; the heartbeat renews every {every:.0f} s with the default"
        f" {DEFAULT_LEASE_TTL:.0f} s lease (InMemoryStore: the renewal's CPU cost alone)\n"
    )
    med = {k: median(v) for k, v in res["renew"].items()}
    res["renew_median_s"] = med
    rows = []
    for label in STORES:
        renew, put = med[f"{label}|renew"], med[f"{label}|set"]
        floor = med.get(f"{label}|floor", math.nan)
        rows.append([label, fmt_time(renew), fmt_time(put), fmt_ratio(renew / put)])
        rows[-1] += [fmt_time(floor), fmt_ratio(renew / floor)]
    headers = ["store", "renew()", "store.set, same bytes", "renew / set"]
    print(table([*headers, "bare upsert + commit", "renew / bare"], rows))
    print(
        f"\n## Fenced write vs unfenced: handle.fenced(apply: record check + record move +"
        f" snapshot Put) vs Checkpoint.write_encoded -> store.set\nmedian of {repeats} repeats,"
        f" each the median of {'/'.join(str(saves[s]) for s in SIZES)} writes, interleaved"
        " write by write (InMemoryStore: the fence's CPU cost alone)\n"
    )
    rows = []
    for r in res["fenced"].values():
        med = {k: median(v) for k, v in r["repeats"].items()}
        r["median_s"] = med
        for label in STORES:
            put, fenced = med[f"{label}|set"], med[f"{label}|fenced"]
            row = [fmt_bytes(r["bytes"]), label, fmt_time(put), fmt_time(fenced)]
            rows.append([*row, fmt_ratio(fenced / put), fmt_time(fenced - put)])
    headers = ["snapshot", "store", "unfenced set", "fenced apply", "fenced / set", "added"]
    print(table(headers, rows))


if __name__ == "__main__":
    cli(__doc__, "oma-actors run-lease overhead (issue 10 item 7, beside P12)", measure, report)

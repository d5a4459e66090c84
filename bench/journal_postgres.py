"""P14: a leased run on PostgreSQL, journal-first (D15) vs fenced snapshots, and their floor.

Each run is the scripted workload of ``checkpoint_workload`` (one 1 KiB tool result per turn)
through ``OpenMultiAgent.run_tasks`` with a run lease whose record lives in the run's own
``PostgresStore`` table, so every save is fenced. Variants, interleaved run by run (the order
rotates each repeat), each on fresh tables:

* **journal**: journal-first on ``PostgresRunJournal`` in the same database: per-turn boundaries
  are fenced appends (one transaction with the record check), snapshots are compactions.
* **snapshot**: today's leased run without a durable journal: every boundary is a fenced
  snapshot (one ``apply`` of the record check, the record's move and the whole snapshot).
* **memory-journal**, **memory-snapshot**: the same two save paths in memory (an
  ``InMemoryStore``, an ``InMemoryRunJournal``, no lease): the runtime's own CPU per boundary
  on that path (the fold check, or encoding the whole snapshot), taken out of the variant above
  ("time added per boundary" is what the database adds).
* **floor**: one bare ``INSERT`` + ``COMMIT`` (autocommit, on a held connection) per boundary
  of the bytes the journal run appended per boundary: what a boundary must cost at least.

Reported: time added per boundary and its ratio to the floor (goal <= 1.5x), WAL bytes per
turn (``pg_current_wal_lsn()`` difference; the server is shared, so other clients' WAL is in
it too) against the 1 KiB changed per turn (goal <= 12x), table bytes after the run, and the
WAL growth exponent between the two turn counts (goal <= 1.1).

Run: ``.venv/bin/python bench/journal_postgres.py [--turns 300 1000] [--repeats 3] [--dsn DSN]
[--skip-snapshot-above N]``; without a reachable PostgreSQL it says why and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import time
import uuid
from collections import Counter
from typing import Any

import asyncpg
from checkpoint_report import KIB, fmt_bytes, fmt_ratio, fmt_time, median, rotated, table, verdict
from checkpoint_workload import RUN_ID, Trace, bench_agent, bench_task
from store_postgres import DEFAULT_DSN, probe

from oma_actors import CheckpointOptions, OpenMultiAgent, Team
from oma_actors.actors import event_loop_factory
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import InMemoryRunJournal, JournalOptions, PostgresRunJournal
from oma_actors.runs import MemoryStoreRunStore, RunStoreOptions
from oma_actors.stores import InMemoryStore
from oma_actors.stores.postgres import PostgresStore

PAYLOAD = KIB
GOAL_TIME, GOAL_WAL, GOAL_EXPONENT = 1.5, 12.0, 1.1
VARIANTS = ("journal", "snapshot", "memory-journal", "memory-snapshot", "floor")


async def wal_lsn(conn: Any) -> str:
    """The server's current WAL position."""
    return str(await conn.fetchval("SELECT pg_current_wal_lsn()::text"))


async def wal_since(conn: Any, start: str) -> int:
    """WAL bytes written since ``start``."""
    return int(
        await conn.fetchval(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)::bigint", start
        )
    )


async def one_run(dsn: str, conn: Any, variant: str, turns: int) -> dict[str, Any]:
    """One run of ``variant`` (journal, snapshot or memory) on fresh tables."""
    table = f"oma_p14_{uuid.uuid4().hex[:10]}"
    saves: Counter[str] = Counter()

    def count(event: ProgressEvent) -> None:
        if isinstance(event, CheckpointSaved):
            saves[event.mode] += 1

    team = Team("bench", [bench_agent(turns, PAYLOAD, Trace())])
    store: Any
    if variant.startswith("memory"):
        store, runs = InMemoryStore(), None
        journal = InMemoryRunJournal() if variant == "memory-journal" else None
    else:
        store = await PostgresStore(dsn, table=table).open()
        runs = RunStoreOptions(MemoryStoreRunStore(store, atomicity="cross-process"))
        journal = PostgresRunJournal(dsn, store_table=table) if variant == "journal" else None
    orchestrator = OpenMultiAgent(on_progress=count, run_store=runs)
    journaled = None if journal is None else JournalOptions(journal, durable=True)
    gc.collect()
    start = await wal_lsn(conn)
    t0 = time.perf_counter()
    result = await orchestrator.run_tasks(
        team, [bench_task()], checkpoint=CheckpointOptions(store=store, run_id=RUN_ID),
        journal=journaled,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    wal = await wal_since(conn, start)
    assert result.success, result.status
    out: dict[str, Any] = {"seconds": seconds, "wal": wal, "saves": dict(saves)}
    out["boundaries"] = sum(saves.values())
    if not variant.startswith("memory"):
        if journal is not None:
            await journal.close()
            out["journal_bytes"] = int(
                await conn.fetchval(
                    f'SELECT coalesce(sum(octet_length(payload)), 0) FROM "{table}_journal"'
                )
            )
        await store.aclose()
        out["table_bytes"] = int(
            await conn.fetchval(
                f"SELECT pg_total_relation_size('\"{table}\"') + "
                f"coalesce(pg_total_relation_size(to_regclass('\"{table}_journal\"')), 0)"
            )
        )
        await conn.execute(f'DROP TABLE IF EXISTS "{table}", "{table}_journal"')
    return out


async def floor_run(conn: Any, boundaries: int, size: int) -> dict[str, Any]:
    """``boundaries`` autocommit INSERTs of ``size`` bytes each: the floor of a boundary."""
    table = f"oma_p14_floor_{uuid.uuid4().hex[:10]}"
    await conn.execute(f'CREATE TABLE "{table}" (id BIGINT PRIMARY KEY, payload TEXT NOT NULL)')
    sql = f'INSERT INTO "{table}" (id, payload) VALUES ($1, $2)'
    try:
        await conn.execute(sql, 0, "x")  # prepared and warm
        start = await wal_lsn(conn)
        t0 = time.perf_counter()
        for i in range(1, boundaries + 1):
            await conn.execute(sql, i, f"{i:08d}" + "x" * max(0, size - 8))
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "wal": await wal_since(conn, start), "boundaries": boundaries}
    finally:
        await conn.execute(f'DROP TABLE IF EXISTS "{table}"')


async def measure(a: argparse.Namespace) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """Every variant at every turn count, ``a.repeats`` times, interleaved run by run."""
    conn = await asyncpg.connect(a.dsn)
    found: dict[int, dict[str, list[dict[str, Any]]]] = {}
    try:
        for turns in a.turns:
            runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
            skip = turns > a.skip_snapshot_above
            names = [v for v in VARIANTS if not (skip and v.endswith("snapshot"))]
            for rep in range(a.repeats):
                for name in rotated(names, rep):
                    if name == "floor":
                        continue  # after the journal run of this repeat: it needs its sizes
                    runs[name].append(await one_run(a.dsn, conn, name, turns))
                    print(f"#   {turns} turns, repeat {rep + 1}: {name} done", flush=True)
                last = runs["journal"][-1]
                size = last["journal_bytes"] // max(1, last["saves"].get("journal", 1))
                runs["floor"].append(await floor_run(conn, last["boundaries"], size))
            found[turns] = runs
    finally:
        await conn.close()
    return found


def per(runs: list[dict[str, Any]], key: str, by: str) -> float:
    """Median over runs of ``run[key] / run[by]``."""
    return median([r[key] / r[by] for r in runs if r.get(by)])


def report(found: dict[int, dict[str, list[dict[str, Any]]]]) -> None:
    """The P14 tables: time per boundary vs the floor, WAL and table bytes, growth."""
    rows, wal_turn = [], {}
    for turns, runs in found.items():
        floor = per(runs["floor"], "seconds", "boundaries")
        for name in ("journal", "snapshot"):
            if not runs[name]:
                rows.append([str(turns), name, "not run (--skip-snapshot-above)", "", "", "", ""])
                continue
            cpu = per(runs[f"memory-{name}"], "seconds", "boundaries")
            added = per(runs[name], "seconds", "boundaries") - cpu
            bug = " BENCH BUG (< 1.0x the floor)" if added < floor else ""
            wal = median([r["wal"] / turns for r in runs[name]])
            wal_turn[(name, turns)] = median([r["wal"] for r in runs[name]])
            saves = runs[name][-1]["saves"]
            rows.append([
                str(turns), name, f"{saves}", fmt_time(added),
                f"{fmt_ratio(added / floor)} {verdict(added / floor, GOAL_TIME)}{bug}",
                f"{fmt_bytes(wal)} = {fmt_ratio(wal / PAYLOAD)} {verdict(wal / PAYLOAD, GOAL_WAL)}",
                fmt_bytes(median([r["table_bytes"] for r in runs[name]])),
            ])  # fmt: skip
        rows.append([
            str(turns), "floor (INSERT+COMMIT)", f"{runs['floor'][-1]['boundaries']} rows",
            fmt_time(floor), "1.00x", fmt_bytes(median([r["wal"] / turns for r in runs["floor"]])),
            "",
        ])  # fmt: skip
    print("\n## P14 a leased run on PostgreSQL, median of repeats\n")
    headers = ["turns", "variant", "saves by mode", "added / boundary", "x floor (<= 1.5)",
               "WAL / turn (x 1 KiB, <= 12)", "table bytes"]  # fmt: skip
    print(table(headers, rows))
    low, high = min(found), max(found)
    if low != high:
        print()
        for name in ("journal", "snapshot"):
            if (name, low) in wal_turn and (name, high) in wal_turn:
                k = math.log(wal_turn[(name, high)] / wal_turn[(name, low)]) / math.log(high / low)
                print(f"- WAL growth exponent {name} {low}->{high} turns: {k:.2f} "
                      f"{verdict(k, GOAL_EXPONENT)}")  # fmt: skip


def main() -> None:
    """Parse the command line, measure, print."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--turns", type=int, nargs="+", default=[300, 1000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dsn", default=DEFAULT_DSN)
    ap.add_argument("--skip-snapshot-above", type=int, default=10**9,
                    help="no snapshot variant above this many turns (it is quadratic)")  # fmt: skip
    a = ap.parse_args()
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        ok, info = runner.run(probe(a.dsn))
        if not ok:
            print(f"# P14: skipped, {info}")
            return
        print(f"# P14 journal_postgres.py  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n# {info}")
        print(f"# turns={a.turns} repeats={a.repeats} payload={PAYLOAD} B")
        report(runner.run(measure(a)))


if __name__ == "__main__":
    main()

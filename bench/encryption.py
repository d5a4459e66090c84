"""P16: what encryption at rest adds, side by side with the same paths unencrypted (BENCH.md).

Two figures, each a ratio of the encrypted path to the same path in plaintext, measured
interleaved (each round runs every variant once, in a shuffled order) and reported as the median
over repeats of each repeat's median:

* **P1/P2 on the JSONL journal** (``checkpoint_workload``'s scripted run, ``journal`` kind:
  ``FileStore`` + durable ``JsonlRunJournal``, journal-first): whole runs of ``plain``
  (``FileStore`` + ``JsonlRunJournal``), ``sealed`` (``EncryptingStore(FileStore)`` +
  ``EncryptingJournal(JsonlRunJournal)``) and ``none`` (no checkpoint). Added per turn =
  (run - the ``none`` run) / turns; a turn is 3 durable boundaries, so P1's per-boundary figure
  is the same ratio over short runs (``--p1-turns``) and P2's over ``--p2-turns``-turn runs.
* **P12 on PostgreSQL** (``store_postgres``'s real snapshots near 2 KiB, 64 KiB and 1 MiB):
  ``RunWriter.save`` on a ``PostgresStore`` vs on ``EncryptingStore(PostgresStore)``, unfenced
  and fenced (a run lease: one ``apply`` with the record check). Skipped without PostgreSQL.

Run: ``.venv/bin/python bench/encryption.py [--quick] [--json PATH] [--dsn DSN]``.
Goal: encrypted / plain <= 1.2x on each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import tempfile
import time
import uuid
from dataclasses import replace
from typing import Any

import asyncpg
from checkpoint import git_revision, loadavg
from checkpoint_report import KIB, fmt_bytes, fmt_ratio, fmt_time, median, table, verdict
from checkpoint_workload import RUN_ID, Trace, bench_agent, bench_task, remove_quietly
from store_postgres import DEFAULT_DSN, SIZES, probe, real_snapshots

from oma_actors import CheckpointOptions, OpenMultiAgent, Team
from oma_actors.actors import event_loop_factory
from oma_actors.checkpoint import Checkpoint
from oma_actors.checkpoint.run_writer import RunWriter
from oma_actors.journal import EncryptingJournal, JournalOptions, JsonlRunJournal
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import EncryptingStore, FileStore, KeyRing
from oma_actors.stores.postgres import PostgresStore

GOAL = 1.2  # P16: encrypted / plaintext, at most
RING = KeyRing({"bench": os.urandom(32)}, active="bench")
KINDS = ("none", "plain", "sealed")


async def one_run(kind: str, turns: int, payload: int, workdir: str) -> float:
    """Seconds of one scripted run of ``kind`` (see the module docstring)."""
    path = os.path.join(workdir, f"enc-{kind}.json")
    jpath = os.path.join(workdir, f"enc-{kind}.jsonl")
    remove_quietly(path)
    remove_quietly(jpath)
    team = Team("bench", [bench_agent(turns, payload, Trace())])
    async with contextlib.AsyncExitStack() as stack:
        checkpoint: CheckpointOptions | bool = False
        journal: JournalOptions | None = None
        if kind != "none":
            store: Any = await stack.enter_async_context(FileStore.open(path))
            backend: Any = JsonlRunJournal(jpath, flush_interval_ms=0)
            stack.push_async_callback(backend.close)
            if kind == "sealed":
                store, backend = EncryptingStore(store, RING), EncryptingJournal(backend, RING)
            checkpoint = CheckpointOptions(store=store, run_id=RUN_ID)
            journal = JournalOptions(backend, durable=True)
        t0 = time.perf_counter()
        result = await OpenMultiAgent().run_tasks(
            team, [bench_task()], checkpoint=checkpoint, journal=journal
        )
        elapsed = time.perf_counter() - t0
    if not result.success:
        raise RuntimeError(f"bench run {kind} failed: {result.status}")
    remove_quietly(path)
    remove_quietly(jpath)
    return elapsed


async def journal_figure(turns: int, repeats: int, payload: int) -> dict[str, Any]:
    """Added time per turn of ``plain`` and ``sealed`` over ``repeats`` interleaved rounds."""
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="oma-bench-enc-") as workdir:
        for rep in range(repeats):
            gc.collect()
            for kind in random.Random(rep).sample(KINDS, len(KINDS)):
                samples[kind].append(await one_run(kind, turns, payload, workdir) / turns)
    base = median(samples["none"])
    added = {kind: median(samples[kind]) - base for kind in ("plain", "sealed")}
    return {
        "turns": turns,
        "per_turn_s": {kind: median(v) for kind, v in samples.items()},
        "added_per_turn_s": added,
        "ratio": added["sealed"] / added["plain"],
        "samples": samples,
    }


async def postgres_figure(dsn: str, repeats: int, saves: dict[int, int]) -> dict[str, Any]:
    """``RunWriter.save`` per size: plain vs sealed PostgresStore, unfenced and fenced."""
    snaps = await real_snapshots(SIZES, KIB)
    table_name = f"oma_bench_enc_{uuid.uuid4().hex[:10]}"
    out: dict[str, Any] = {"sizes": {}}
    async with PostgresStore(dsn, table=table_name) as plain:
        sealed = EncryptingStore(plain, RING)
        handles = {}
        for name, store in (("plain", plain), ("sealed", sealed)):
            ledger = RunLedger(MemoryStoreRunStore(store, atomicity="cross-process"))
            handles[name] = await ledger.acquire(f"bench-fenced-{name}", heartbeat=False)
        try:
            for size in SIZES:
                snap = replace(snaps[size], run_id=RUN_ID)
                writers = {}
                for name, store in (("plain", plain), ("sealed", sealed)):
                    unfenced = Checkpoint(store, run_id=f"bench-{name}")
                    fenced = Checkpoint(store, run_id=handles[name].run_id)
                    writers[name] = RunWriter(unfenced, emit=lambda _e: None)
                    writers[f"{name} fenced"] = RunWriter(
                        fenced, emit=lambda _e: None, fence=handles[name]
                    )
                rows: dict[str, list[float]] = {name: [] for name in writers}
                for rep in range(repeats):
                    gc.collect()
                    times: dict[str, list[float]] = {name: [] for name in writers}
                    for writer in writers.values():
                        await writer.save(snap, boundary="tool_results")  # warm
                    for i in range(saves[size]):
                        for name in random.Random(rep * 100_000 + i).sample(
                            list(writers), len(writers)
                        ):
                            t0 = time.perf_counter()
                            await writers[name].save(snap, boundary="tool_results")
                            times[name].append(time.perf_counter() - t0)
                    for name, values in times.items():
                        rows[name].append(median(values))
                out["sizes"][size] = {"repeats": rows}
        finally:
            for handle in handles.values():
                await handle.release()
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute(f'DROP TABLE IF EXISTS "{table_name}"')
            finally:
                await conn.close()
    return out


def report_journal(res: dict[str, Any], label: str) -> list[str]:
    """One row of the journal table."""
    added = res["added_per_turn_s"]
    per_boundary = {k: v / 3 for k, v in added.items()}
    return [
        label,
        str(res["turns"]),
        fmt_time(per_boundary["plain"]),
        fmt_time(per_boundary["sealed"]),
        fmt_ratio(res["ratio"]),
        verdict(res["ratio"], GOAL),
    ]


def report_postgres(res: dict[str, Any]) -> list[list[str]]:
    """The rows of the PostgreSQL table."""
    rows = []
    for size, r in res["sizes"].items():
        med = {k: median(v) for k, v in r["repeats"].items()}
        r["median_s"] = med
        for path in ("", " fenced"):
            ratio = med[f"sealed{path}"] / med[f"plain{path}"]
            r[f"ratio{path}"] = ratio
            rows.append(
                [
                    fmt_bytes(size),
                    f"RunWriter.save{path}",
                    fmt_time(med[f"plain{path}"]),
                    fmt_time(med[f"sealed{path}"]),
                    fmt_ratio(ratio),
                    verdict(ratio, GOAL),
                ]
            )
    return rows


def main() -> None:
    """Run P16 and print its two tables."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a smoke run of seconds")
    ap.add_argument("--repeats", type=int, default=0, help="interleaved repeats [7; quick 3]")
    ap.add_argument("--p1-turns", type=int, default=0, help="turns of P1's runs [30; quick 10]")
    ap.add_argument("--p2-turns", type=int, default=0, help="turns of P2's runs [300; quick 40]")
    ap.add_argument("--dsn", default=DEFAULT_DSN, help="PostgreSQL URI [%(default)s]")
    ap.add_argument("--json", default=None, help="also write every sample as JSON here")
    a = ap.parse_args()
    repeats = a.repeats or (3 if a.quick else 7)
    p1_turns = a.p1_turns or (10 if a.quick else 30)
    p2_turns = a.p2_turns or (40 if a.quick else 300)
    saves = dict(zip(SIZES, (10, 6, 3) if a.quick else (60, 30, 10), strict=True))
    started = time.perf_counter()
    print(f"# oma-actors encryption at rest benchmark (BENCH.md P16, goal <= {GOAL}x)")
    print(f"# date      {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print(f"# cpus      {os.cpu_count()}  loadavg(before) {loadavg()}")
    print(f"# revision  {git_revision()}")
    print(f"# settings  repeats={repeats} p1_turns={p1_turns} p2_turns={p2_turns} saves={saves}")
    res: dict[str, Any] = {}
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        res["P1"] = runner.run(journal_figure(p1_turns, repeats, KIB))
        res["P2"] = runner.run(journal_figure(p2_turns, repeats, KIB))
        ok, info = runner.run(probe(a.dsn))
        if ok:
            res["P12"] = runner.run(postgres_figure(a.dsn, repeats, saves))
    print(
        "\n## P1/P2 on the JSONL journal: time added per durable boundary (= per turn / 3),"
        " plaintext vs sealed (EncryptingStore(FileStore) + EncryptingJournal(JsonlRunJournal)),"
        f" {KIB} B tool results; median of {repeats} interleaved repeats, less the run without"
        " a checkpoint\n"
    )
    headers = ["figure", "turns", "plain", "sealed", "sealed / plain", "verdict"]
    rows = [report_journal(res["P1"], "P1 (short runs)"), report_journal(res["P2"], "P2")]
    print(table(headers, rows))
    if ok:
        print(
            "\n## P12 on PostgreSQL: time per RunWriter.save, PostgresStore vs"
            f" EncryptingStore(PostgresStore); median of {repeats} repeats, each the median of"
            " its saves, interleaved save by save\n"
        )
        headers = ["snapshot", "path", "plain", "sealed", "sealed / plain", "verdict"]
        print(table(headers, report_postgres(res["P12"])))
    else:
        print(f"\n## P12 skipped: {info}")
    print(f"\n# total {time.perf_counter() - started:.0f} s, loadavg(after) {loadavg()}")
    if a.json:
        with open(a.json, "w") as handle:
            json.dump(res, handle, indent=1, default=str)


if __name__ == "__main__":
    main()

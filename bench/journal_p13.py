"""P13 at the journal: durable boundaries per second with 1,000 concurrent runs in one process.

Each of ``--runs`` runs has its own ``JournalRecorder`` in durable mode (journal-first, D10) on
ONE shared journal, and makes ``--boundaries`` durable boundaries one after the other: a
boundary is ``await recorder.append(draft)`` of one event carrying ``--payload`` bytes, which
returns only once the batch holding it is committed (fsync or transaction), then
``take_through`` (what the run's writer does with the events it saves). All runs go at
once, so the journal's group commit is what is measured. Backends, interleaved (rotated) per
repeat: ``JsonlRunJournal`` (flush window 0, ``append_now``), ``SqliteRunJournal`` and
``PostgresRunJournal`` (``open_journal``'s defaults). Reported: boundaries/s (median of
repeats), boundaries per commit (fsyncs or transactions, counted, not inferred) and the CPU
seconds of this process per boundary (``time.process_time``: every thread, the fsync and SQLite
worker threads included; the PostgreSQL server's own CPU is not counted). The machine is shared,
so wall throughput moves with the load while CPU per boundary does not: ``1 / cpu per boundary``
is how many boundaries/s one core of this process could carry, set against the goal.
``--profile`` then cProfiles one more pass per backend and prints the top of it.

This isolates the journal: a whole run also spends CPU in the agent loop and the fold check per
boundary, which ``bench/checkpoint.py`` measures. Run: ``.venv/bin/python bench/journal_p13.py
[--runs 1000] [--boundaries 20] [--repeats 3] [--dsn DSN] [--profile] [--only jsonl,postgres]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import tempfile
import time
import uuid
from typing import Any

import asyncpg
from checkpoint_report import fmt_ratio, median, rotated, table, verdict
from store_postgres import DEFAULT_DSN, probe

from oma_actors.actors import event_loop_factory
from oma_actors.journal import (
    JournalRecorder,
    JsonlRunJournal,
    PostgresRunJournal,
    SqliteRunJournal,
    vocabulary,
)
from oma_actors.llm import Message, TextBlock

GOALS = {"jsonl": 20_000.0, "postgres": 5_000.0}
BACKENDS = ("jsonl", "sqlite", "postgres")


class _FsyncCount:
    """Counts ``os.fsync`` calls (the JSONL journal's one fsync per batch)."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = os.fsync

    def __enter__(self) -> _FsyncCount:
        def counting(fd: int) -> None:
            self.calls += 1
            self._real(fd)

        os.fsync = counting
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real


async def one(
    backend: str, a: argparse.Namespace, workdir: str, profile: cProfile.Profile | None = None
) -> dict[str, Any]:
    """``a.runs`` recorders making ``a.boundaries`` durable boundaries each, on one journal.

    With ``profile``, the timed part runs under it (the figures of such a pass are not quoted).
    """
    table = f"oma_p13_{uuid.uuid4().hex[:10]}"
    journal: Any
    if backend == "jsonl":
        journal = JsonlRunJournal(os.path.join(workdir, f"{table}.jsonl"), flush_interval_ms=0)
    elif backend == "sqlite":
        journal = SqliteRunJournal(os.path.join(workdir, f"{table}.db"))
    else:
        journal = PostgresRunJournal(a.dsn, store_table=table)
    await journal.read_from(10**9)  # connected / created before the clock starts
    message = Message("user", [TextBlock("x" * a.payload)])
    recorders = [
        await JournalRecorder.open(journal, run_id=f"run-{i}", attempt=1, durable=True)
        for i in range(a.runs)
    ]

    async def run(recorder: JournalRecorder) -> None:
        for _ in range(a.boundaries):
            draft = vocabulary.user_message(message=message, origin="tool_results")
            event = await recorder.append(draft)
            # The run's writer takes what it saves (``RunWriter`` folds it): a durable
            # recorder keeps its events until then, so a bench that never took them would
            # time a heap growing by 20,000 events (the garbage collector's walks of it).
            recorder.take_through(event.seq)

    with _FsyncCount() as fsyncs:
        before = getattr(journal, "batches", 0)
        if profile is not None:
            profile.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(run(r) for r in recorders))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        if profile is not None:
            profile.disable()
        commits = getattr(journal, "batches", 0) - before if backend != "jsonl" else fsyncs.calls
    await journal.close()
    if backend == "postgres":
        conn = await asyncpg.connect(a.dsn)
        try:
            await conn.execute(f'DROP TABLE IF EXISTS "{table}_journal"')
        finally:
            await conn.close()
    total = a.runs * a.boundaries
    return {
        "per_s": total / seconds,
        "per_commit": total / max(1, commits),
        "seconds": seconds,
        "cpu_per": cpu / total,
    }


async def measure(a: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Every backend, ``a.repeats`` times, rotated."""
    backends = a.only
    found: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
    with tempfile.TemporaryDirectory(prefix="oma-p13-") as workdir:
        for rep in range(a.repeats):
            for backend in rotated(backends, rep):
                found[backend].append(await one(backend, a, workdir))
    return found


async def profiles(a: argparse.Namespace, top: int = 15) -> dict[str, str]:
    """One cProfiled pass per backend: the ``top`` functions by own time, as pstats prints them."""
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="oma-p13-prof-") as workdir:
        for backend in a.only:
            profile = cProfile.Profile()
            await one(backend, a, workdir, profile)
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
            out[backend] = text.getvalue()
    return out


def main() -> None:
    """Parse the command line, measure, print the P13 table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--boundaries", type=int, default=20)
    ap.add_argument("--payload", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dsn", default=DEFAULT_DSN)
    ap.add_argument("--only", default=",".join(BACKENDS), help="backends, comma-separated")
    ap.add_argument("--profile", action="store_true", help="then cProfile one pass per backend")
    a = ap.parse_args()
    a.only = [b for b in a.only.split(",") if b]
    unknown = sorted(set(a.only) - set(BACKENDS))
    if unknown:
        ap.error(f"unknown backends {unknown}; choose from {', '.join(BACKENDS)}")
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        ok, info = runner.run(probe(a.dsn))
        if not ok:
            print(f"# P13: skipped, {info}")
            return
        print(f"# P13 journal_p13.py  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n# {info}")
        print(f"# runs={a.runs} boundaries={a.boundaries} payload={a.payload} B")
        found = runner.run(measure(a))
    rows = []
    for backend, runs in found.items():
        if not runs:
            continue
        rate = median([r["per_s"] for r in runs])
        goal = GOALS.get(backend)
        against = "n/a"
        if goal is not None:
            against = f"{fmt_ratio(rate / goal)} {verdict(rate, goal, at_most=False)}"
        per_commit = median([r["per_commit"] for r in runs])
        cpu = min(r["cpu_per"] for r in runs)
        allows = 1 / cpu
        reach = "n/a" if goal is None else f"{fmt_ratio(allows / goal)} of {goal:,.0f}/s"
        rows.append(
            [
                backend,
                f"{rate:,.0f}/s",
                f"{per_commit:.0f}",
                against,
                f"{cpu * 1e6:.1f} us (median {median([r['cpu_per'] for r in runs]) * 1e6:.1f})",
                f"{allows:,.0f}/s",
                reach,
            ]
        )
    print(f"\n## P13 durable boundaries/s, {a.runs} concurrent runs, median of {a.repeats}\n")
    headers = [
        "journal",
        "boundaries/s (wall)",
        "boundaries per commit",
        "wall x goal",
        "CPU / boundary (best)",
        "1 / CPU",
        "1 / CPU x goal",
    ]
    print(table(headers, rows))
    if a.profile:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            for backend, text in runner.run(profiles(a)).items():
                print(f"\n## cProfile, {backend} (top by own time)\n\n```\n{text.strip()}\n```")


if __name__ == "__main__":
    main()

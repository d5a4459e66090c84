"""P13 at the journal: durable boundaries per second with 1,000 concurrent runs in one process.

Each of ``--runs`` runs has its own ``JournalRecorder`` in durable mode (journal-first, D10) on
ONE shared journal, and makes ``--boundaries`` durable boundaries one after the other: a
boundary is ``await recorder.append(draft)`` of one event carrying ``--payload`` bytes, which
returns only once the batch holding it is committed (fsync or transaction). All runs go at
once, so the journal's group commit is what is measured. Backends, interleaved (rotated) per
repeat: ``JsonlRunJournal`` (flush window 0, ``append_now``), ``SqliteRunJournal`` and
``PostgresRunJournal`` (``open_journal``'s defaults). Reported: boundaries/s (median of
repeats) and boundaries per commit (fsyncs or transactions, counted, not inferred).

This isolates the journal: a whole run also spends CPU in the agent loop and the fold check per
boundary, which ``bench/checkpoint.py`` measures. Run: ``.venv/bin/python bench/journal_p13.py
[--runs 1000] [--boundaries 20] [--repeats 3] [--dsn DSN]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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


async def one(backend: str, a: argparse.Namespace, workdir: str) -> dict[str, Any]:
    """``a.runs`` recorders making ``a.boundaries`` durable boundaries each, on one journal."""
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
            await recorder.append(draft)

    with _FsyncCount() as fsyncs:
        before = getattr(journal, "batches", 0)
        t0 = time.perf_counter()
        await asyncio.gather(*(run(r) for r in recorders))
        seconds = time.perf_counter() - t0
        commits = getattr(journal, "batches", 0) - before if backend != "jsonl" else fsyncs.calls
    await journal.close()
    if backend == "postgres":
        conn = await asyncpg.connect(a.dsn)
        try:
            await conn.execute(f'DROP TABLE IF EXISTS "{table}_journal"')
        finally:
            await conn.close()
    total = a.runs * a.boundaries
    return {"per_s": total / seconds, "per_commit": total / max(1, commits), "seconds": seconds}


async def measure(a: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Every backend, ``a.repeats`` times, rotated."""
    found: dict[str, list[dict[str, Any]]] = {b: [] for b in BACKENDS}
    with tempfile.TemporaryDirectory(prefix="oma-p13-") as workdir:
        for rep in range(a.repeats):
            for backend in rotated(BACKENDS, rep):
                found[backend].append(await one(backend, a, workdir))
    return found


def main() -> None:
    """Parse the command line, measure, print the P13 table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--boundaries", type=int, default=20)
    ap.add_argument("--payload", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dsn", default=DEFAULT_DSN)
    a = ap.parse_args()
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
        rate = median([r["per_s"] for r in runs])
        goal = GOALS.get(backend)
        against = "n/a"
        if goal is not None:
            against = f"{fmt_ratio(rate / goal)} {verdict(rate, goal, at_most=False)}"
        per_commit = median([r["per_commit"] for r in runs])
        rows.append([backend, f"{rate:,.0f}/s", f"{per_commit:.0f}", against])
    print(f"\n## P13 durable boundaries/s, {a.runs} concurrent runs, median of {a.repeats}\n")
    print(table(["journal", "boundaries/s", "boundaries per commit", "x goal"], rows))


if __name__ == "__main__":
    main()

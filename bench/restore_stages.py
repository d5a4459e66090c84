"""Where a P5 restore's CPU goes, stage by stage, on a captured 1000-turn journal-first run.

P5 (``checkpoint.py --only P5``) times a whole restore child; this splits the part of it this
module can call on its own: open the FileStore (read + parse the state file), ``load_latest``
(decode + validate the snapshot), ``read_journal_tail`` (scan + parse the run's lines above the
snapshot's marks) and ``fold_tail``. What a child spends beyond their sum is the restored
attempt's setup up to its first model call (the recorder, the writer's view, the ``run/start``
append). Each stage is CPU time of the process (``process_time``: the reader thread counts),
median of ``--repeats`` fresh processes, so no stage runs with warm caches of an earlier one.

    .venv/bin/python bench/restore_stages.py --capture   # once: run 1000 turns, keep the files
    .venv/bin/python bench/restore_stages.py             # the table (5 processes)

``--workdir`` (default ``/tmp/oma-restore-stages``) holds the captured ``cap.json`` and
``cap.jsonl`` (the files at the first model call after the last tool turn, as P5 captures them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from checkpoint_workload import RUN_ID, run_ours

from oma_actors.checkpoint import Checkpoint, fold_tail, read_journal_tail
from oma_actors.journal import JsonlRunJournal
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.stores import FileStore

STAGES = ("open", "load_latest", "read_journal_tail", "fold_tail")


async def _stages(store_path: str, journal_path: str) -> dict[str, float]:
    """CPU seconds of each stage, in order, on fresh copies of the captured files."""
    cpu: dict[str, float] = {}
    t = time.process_time()

    def mark(name: str) -> None:
        nonlocal t
        now = time.process_time()
        cpu[name] = now - t
        t = now

    async with FileStore.open(store_path) as store:
        mark("open")
        snapshot = await Checkpoint(store, run_id=RUN_ID).load_latest()
        mark("load_latest")
        assert snapshot is not None, "the captured store holds no snapshot"
        snapshot = adopt_journal_fields(snapshot)
        journal = JsonlRunJournal(journal_path, flush_interval_ms=0)
        try:
            t = time.process_time()
            events = await read_journal_tail(journal, snapshot)
            mark("read_journal_tail")
            fold_tail(snapshot, events)
            mark("fold_tail")
        finally:
            await journal.close()
    cpu["events"] = float(len(events))
    return cpu


def _child(workdir: str) -> None:
    store, journal = os.path.join(workdir, "st.json"), os.path.join(workdir, "st.jsonl")
    shutil.copyfile(os.path.join(workdir, "cap.json"), store)
    shutil.copyfile(os.path.join(workdir, "cap.jsonl"), journal)
    print(json.dumps(asyncio.run(_stages(store, journal))))


def main() -> None:
    """Capture, or print the median CPU of each stage over fresh processes."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/oma-restore-stages")
    ap.add_argument("--capture", action="store_true", help="run the 1000-turn run and keep it")
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    if a._child:
        _child(a.workdir)
        return
    if a.capture:
        cap = os.path.join(a.workdir, "cap")
        asyncio.run(run_ours("journal", a.turns, 1024, a.workdir, capture_to=cap))
        print(f"captured {cap}.json and {cap}.jsonl")
        return
    runs = []
    for _ in range(a.repeats):
        cmd = [sys.executable, os.path.abspath(__file__), "--_child", "--workdir", a.workdir]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    print(f"| stage (tail of {int(runs[0]['events'])} events) | CPU, median of {a.repeats} |")
    print("|---|---|")
    for name in STAGES:
        print(f"| {name} | {1000 * statistics.median(r[name] for r in runs):.2f} ms |")
    total = statistics.median(sum(r[name] for name in STAGES) for r in runs)
    print(f"| sum | {1000 * total:.2f} ms |")


if __name__ == "__main__":
    main()

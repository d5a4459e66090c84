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
``cap.jsonl`` (the files at the first model call after the last tool turn, as P5 captures them);
``--kind file`` captures and splits the FileStore-alone configuration instead (``capfile.json``;
no journal, so no tail stages).

The **parse floor** row is what no reader of these formats can avoid (``parse_floor.py``),
measured in the same child on the same bytes. A P5 goal below it cannot be met by any restore
that reads these files, whatever it does with the parsed values. It runs
after the stages, in memory the restore has already grown; the **fresh-process** row parses the
same bytes in a child that has done nothing else, as a P5 child's allocator meets them (page
faults and arena growth included): the floor a P5 child cannot go under.
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
from parse_floor import parse_floor, tail_lines

from oma_actors.checkpoint import Checkpoint, fold_tail, read_journal_tail
from oma_actors.journal import JsonlRunJournal
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.stores import FileStore

STAGES = ("open", "load_latest", "read_journal_tail", "fold_tail")
FILE_STAGES = STAGES[:2]
"""The FileStore-alone configuration has no journal: its restore opens and loads only."""


async def _stages(store_path: str, journal_path: str | None) -> dict[str, float]:
    """CPU seconds of each stage, in order, on fresh copies of the captured files (without a
    journal, the FileStore-alone configuration: only its first two stages)."""
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
        if journal_path is None:
            cpu["events"] = 0.0
            cpu["floor"] = parse_floor(store_path, [])
            return cpu
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
    cpu["tail_from"] = float(min((event.seq for event in events), default=0))
    cpu["floor"] = parse_floor(store_path, tail_lines(journal_path, int(cpu["tail_from"])))
    return cpu


def _cold_floor(workdir: str, kind: str, tail_from: int) -> None:
    """The parse floor in a process that has done nothing else (``--_floor``): the same bytes
    as the stages child's floor, parsed by a fresh allocator, as a restore child parses them."""
    cap = os.path.join(workdir, _captured(kind))
    lines = tail_lines(cap + ".jsonl", tail_from) if kind == "journal" and tail_from > 0 else []
    print(json.dumps({"floor": parse_floor(cap + ".json", lines)}))


def _child(workdir: str, kind: str) -> None:
    store = os.path.join(workdir, "st.json")
    shutil.copyfile(os.path.join(workdir, f"{_captured(kind)}.json"), store)
    journal = None
    if kind == "journal":
        journal = os.path.join(workdir, "st.jsonl")
        shutil.copyfile(os.path.join(workdir, "cap.jsonl"), journal)
    print(json.dumps(asyncio.run(_stages(store, journal))))


def _captured(kind: str) -> str:
    """The captured files' name in the workdir (``cap`` for the journal configuration)."""
    return "cap" if kind == "journal" else "capfile"


def main() -> None:
    """Capture, or print the median CPU of each stage over fresh processes."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/oma-restore-stages")
    ap.add_argument("--capture", action="store_true", help="run the 1000-turn run and keep it")
    ap.add_argument(
        "--kind",
        choices=("journal", "file"),
        default="journal",
        help="FileStore + durable journal (default), or FileStore alone",
    )
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_floor", type=int, default=-1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    if a._child:
        _child(a.workdir, a.kind)
        return
    if a._floor >= 0:
        _cold_floor(a.workdir, a.kind, a._floor)
        return
    if a.capture:
        cap = os.path.join(a.workdir, _captured(a.kind))
        asyncio.run(run_ours(a.kind, a.turns, 1024, a.workdir, capture_to=cap))
        print(f"captured {cap}.json" + (f" and {cap}.jsonl" if a.kind == "journal" else ""))
        return
    runs, cold = [], []
    for _ in range(a.repeats):  # interleaved: a stages child, then a cold-floor child
        cmd = [sys.executable, os.path.abspath(__file__), "--_child", "--workdir", a.workdir]
        cmd += ["--kind", a.kind]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        cmd = [sys.executable, os.path.abspath(__file__), "--workdir", a.workdir]
        cmd += ["--kind", a.kind, "--_floor", str(int(runs[-1].get("tail_from", 0)))]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        cold.append(json.loads(out.strip().splitlines()[-1])["floor"])
    stages = STAGES if a.kind == "journal" else FILE_STAGES
    what = f"tail of {int(runs[0]['events'])} events" if a.kind == "journal" else "FileStore alone"
    print(f"| stage ({what}) | CPU, median of {a.repeats} |")
    print("|---|---|")
    for name in stages:
        print(f"| {name} | {1000 * statistics.median(r[name] for r in runs):.2f} ms |")
    total = statistics.median(sum(r[name] for name in stages) for r in runs)
    floor = statistics.median(r["floor"] for r in runs)
    print(f"| sum | {1000 * total:.2f} ms |")
    ratio = total / floor
    print(f"| parse floor (orjson alone, same bytes) | {1000 * floor:.2f} ms ({ratio:.2f}x) |")
    cold_floor = statistics.median(cold)
    print(
        f"| parse floor in a fresh process (the same, nothing before it) | {1000 * cold_floor:.2f}"
        f" ms ({total / cold_floor:.2f}x) |"
    )


if __name__ == "__main__":
    main()

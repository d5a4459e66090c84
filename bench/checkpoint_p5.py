"""P5: restore of the long run in a fresh process, from after import to the first model call.

Ours: the files of the first 1000-turn ``file`` and ``journal`` runs of P3, captured at the
first model call after the last tool turn (the run at its last boundary). Every child gets fresh
copies, because a restore writes (its admission snapshot, its journal events). The journal
child restores with ``OpenMultiAgent().restore(..., journal=JournalOptions(JsonlRunJournal(copy,
flush_interval_ms=0), durable=True))``: load the last snapshot, fold the journal tail above its
watermark, rebuild, continue. LangGraph: a child crashes (``os._exit``) at step 1000, then fresh
children time ``invoke(None)`` from after import to the first resumed node, for SqliteSaver and
for DeltaChannel. The children run ``checkpoint_child.py``; each times itself with
``perf_counter`` from after its imports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

from checkpoint_journal import CHILD
from checkpoint_report import GOALS, fmt_bytes, fmt_ratio, fmt_time, median, rotated, table, verdict
from checkpoint_runs import run_one
from checkpoint_settings import CONFIGS, OURS, Bench
from checkpoint_workload import RUN_ID, remove_quietly
from parse_floor import tail_from

LG_CHANNEL = {"lg:sqlite": "add", "lg:delta": "delta"}


def run_child(mode: str, store: str, turns: int, payload: int, **extra: str) -> dict[str, Any]:
    """Run one child of ``checkpoint_child.py``; its last stdout line parsed, or an error."""
    cmd = [sys.executable, CHILD, "--_child", mode, "--_store", store]
    cmd += ["--_turns", str(turns), "--_payload", str(payload)]
    for key, value in extra.items():
        cmd += [f"--_{key}", value]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = p.stdout.strip().splitlines()
    if mode == "lg-crash" and p.returncode == 0 and not lines:
        return {}  # it died at the crash step, as it should
    if p.returncode != 0 or not lines:
        return {"error": f"{mode}: rc={p.returncode} {p.stderr[-600:]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def copy_db(src: str, dst: str) -> None:
    """Copy a SQLite database with its -wal and -shm files."""
    remove_quietly(dst)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, dst + suffix)


def prepare(bench: Bench) -> dict[str, str]:
    """Per variant, the source to restore: ours captured by P3 (or now), LangGraph crashed now."""
    s = bench.s
    n = s.long_turns
    for name in OURS:
        if name not in bench.shared.restore_sources:  # P3 did not run: capture a run now
            cap = os.path.join(s.workdir, f"restore-{name}")
            run_one(bench, name, n, capture_to=cap)
            bench.shared.restore_sources[name] = cap
    sources = {name: bench.shared.restore_sources[name] for name in OURS}
    for name in bench.lg_variants(baselines=False):
        db = os.path.join(s.workdir, f"lg-crashed-{LG_CHANNEL[name]}.sqlite")
        remove_quietly(db)
        crash = run_child("lg-crash", db, n, s.payload, channel=LG_CHANNEL[name])
        if crash.get("error"):
            print(f"# LangGraph crash child ({name}) failed: {crash['error']}")
            continue
        sources[name] = db
    return sources


def one_child(bench: Bench, name: str, src: str) -> dict[str, Any]:
    """One timed restore child of variant ``name`` on a fresh copy of ``src``."""
    s = bench.s
    work = os.path.join(s.workdir, "restore-copy")
    if name.startswith("lg:"):
        copy_db(src, work + ".sqlite")
        return run_child(
            "lg-resume", work + ".sqlite", s.long_turns, s.payload, channel=LG_CHANNEL[name]
        )
    shutil.copyfile(src + ".json", work + ".json")
    extra = {}
    if name == "journal":
        shutil.copyfile(src + ".jsonl", work + ".jsonl")
        extra = {"journal": work + ".jsonl", "durable": str(int(bench.shared.durable))}
    mode = "restore" if name != "load" else "load"
    return run_child(mode, work + ".json", s.long_turns, s.payload, **extra)


def floor_child(bench: Bench, name: str, src: str, first: int) -> dict[str, Any]:
    """One parse-floor child (``parse_floor.py``) on the bytes variant ``name`` restores."""
    s = bench.s
    extra = {"journal": src + ".jsonl", "tail_from": str(first)} if name == "floor:journal" else {}
    return run_child("floor", src + ".json", s.long_turns, s.payload, **extra)


def run(bench: Bench) -> None:
    """Measure P5, print its table and store its results under ``P5``."""
    s = bench.s
    n = s.long_turns
    sources = prepare(bench)
    sources["load"] = sources["file"]
    # The parse floor of each of ours, in a fresh process as the restore children are: a goal
    # below it cannot be met by any reader of that format (``parse_floor.py``).
    first = bench.runner.run(tail_from(sources["journal"] + ".json", RUN_ID))
    for name in OURS:
        sources[f"floor:{name}"] = sources[name]
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in sources}
    for rep in range(s.child_repeats):
        for name in rotated(list(sources), rep):
            if name.startswith("floor:"):
                out = floor_child(bench, name, sources[name], first)
            else:
                out = one_child(bench, name, sources[name])
            if out.get("error"):
                print(f"# P5 child {name} failed: {out['error']}")
                continue
            samples[name].append(out)
    for suffix in (".json", ".jsonl", ".sqlite", ".sqlite-wal", ".sqlite-shm"):
        remove_quietly(os.path.join(s.workdir, "restore-copy" + suffix))
    sizes = {
        "file": os.path.getsize(sources["file"] + ".json"),
        "journal": os.path.getsize(sources["journal"] + ".json"),
        "journal_tail": os.path.getsize(sources["journal"] + ".jsonl"),
    }
    res: dict[str, Any] = {"turns": n, "sizes": sizes, "samples": samples}
    print(
        f"\n## P5 restore in a fresh process, {n}-turn run: after import -> first resumed model"
        f" call (goal: <= {fmt_time(GOALS['P5'])}; <= LangGraph's resume)\n"
    )
    print(
        f"median of {s.child_repeats} interleaved child processes; FileStore file"
        f" {fmt_bytes(sizes['file'])} (alone) / {fmt_bytes(sizes['journal'])} + journal"
        f" {fmt_bytes(sizes['journal_tail'])} (journal configuration)\n"
    )
    lg_best = min(
        (median([o["seconds"] for o in samples[k]]) for k in LG_CHANNEL if samples.get(k)),
        default=float("nan"),
    )
    rows = []
    floors = {name: median([o["seconds"] for o in samples[f"floor:{name}"]]) for name in OURS}
    for name in [*OURS, "load", *LG_CHANNEL]:
        got = samples.get(name)
        if not got:
            continue
        t = median([o["seconds"] for o in got])
        # CPU seconds of the child (its threads too): what the restore costs when the machine's
        # other processes stretch the wall clock (a loaded, shared machine).
        cpu = median([o.get("cpu_seconds", float("nan")) for o in got])
        res[name] = {"seconds": t, "cpu_seconds": cpu, "messages": got[0]["messages"]}
        if name == "load":
            label = "  of which FileStore open + Checkpoint.load_latest (alone, separate child)"
            rows.append([label, fmt_time(t), fmt_time(cpu), "", ""])
            continue
        check = verdict(t, GOALS["P5"]) if name in OURS else ""
        if name in OURS and lg_best == lg_best:
            check += f"; {fmt_ratio(t / lg_best)} of LangGraph's best"
        floor = floors.get(name)
        if floor is not None:
            res[name]["parse_floor_seconds"] = floor
            check += f"; {fmt_ratio(t / floor)} of its parse floor"
        label = f"{CONFIGS[name]} ({got[0]['messages']} messages)"
        rows.append([label, fmt_time(t), fmt_time(cpu), fmt_ratio(t / GOALS["P5"]), check])
        if floor is not None:
            label = "  its parse floor: orjson alone, the same bytes, a fresh process"
            below = "the goal is below this floor" if floor > GOALS["P5"] else ""
            rows.append([label, fmt_time(floor), "", fmt_ratio(floor / GOALS["P5"]), below])
        word = f" {verdict(t, GOALS['P5']).split(' ')[0]}" if name in OURS else ""
        bench.cell("P5 restore", name, f"{fmt_time(t)}{word}")
    if not s.langgraph:
        rows.append(["LangGraph", f"skipped: {s.lg_skipped}", "", "", ""])
    print(table(["variant", "time", "cpu", "x goal", "verdict"], rows))
    for src in sources.values():
        if src.endswith(".sqlite"):
            remove_quietly(src)
    bench.results["P5"] = res

"""P1: one durable save of a real snapshot of the run, vs the floor and vs LangGraph.

One ``Checkpoint.save`` of real snapshots (near 1, 16 and 64 KiB, picked from a recording store
during the workload) on a ``FileStore`` and an ``InMemoryStore``, vs the floor: the exact bytes
the FileStore wrote, to a temp file + fsync + rename + directory fsync with plain ``os`` calls in
one worker thread awaited from the loop; and vs LangGraph SqliteSaver's time added per step on a
run whose state stays under 64 KiB.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Sequence
from typing import Any

from checkpoint_langgraph import median_interval, run_langgraph
from checkpoint_report import GOALS, fmt_bytes, fmt_ratio, fmt_time, median, rotated, table, verdict
from checkpoint_settings import Bench
from checkpoint_workload import RUN_ID, Trace, bench_agent, bench_task, remove_quietly

from oma_actors import Checkpoint, CheckpointOptions, FileStore, InMemoryStore, OpenMultiAgent, Team
from oma_actors.checkpoint import CheckpointSnapshot, decode, encode
from oma_actors.keyspace import CHECKPOINT_KEY_PREFIX
from oma_actors.testing import RecordingStore


async def real_snapshots(targets: Sequence[int], payload: int) -> dict[int, CheckpointSnapshot]:
    """Run the workload on a recording store; for each target size the closest real snapshot.

    The snapshots are every checkpoint value that landed in the store, however it was written
    (``set``, ``compare_and_set`` or a conditional ``apply``).
    """
    store = RecordingStore(InMemoryStore())
    turns = max(targets) // payload + 8
    agent = bench_agent(turns, payload, Trace())
    options = CheckpointOptions(store=store, run_id=RUN_ID)
    await OpenMultiAgent().run_tasks(Team("bench", [agent]), [bench_task()], checkpoint=options)
    out = {}
    for target in targets:
        text = min(store.values(CHECKPOINT_KEY_PREFIX), key=lambda t: abs(len(t.encode()) - target))
        out[target] = decode(text, key="bench")
    return out


async def time_saves(kind: str, snapshot: CheckpointSnapshot, n: int, path: str) -> list[float]:
    """Seconds of ``n`` consecutive ``Checkpoint.save`` calls of ``snapshot``."""
    ts = []
    if kind == "file":
        async with FileStore.open(path) as store:
            cp = Checkpoint(store, run_id=RUN_ID)
            await cp.save(snapshot)  # warm: the file exists, as in a running run
            for _ in range(n):
                t0 = time.perf_counter()
                await cp.save(snapshot)
                ts.append(time.perf_counter() - t0)
    else:
        cp = Checkpoint(InMemoryStore(), run_id=RUN_ID)
        await cp.save(snapshot)
        for _ in range(n):
            t0 = time.perf_counter()
            await cp.save(snapshot)
            ts.append(time.perf_counter() - t0)
    return ts


async def file_bytes_of_save(snapshot: CheckpointSnapshot, path: str) -> bytes:
    """The exact bytes a FileStore holding only this checkpoint writes on each save."""
    remove_quietly(path)
    async with FileStore.open(path) as store:
        await Checkpoint(store, run_id=RUN_ID).save(snapshot)
    data = read_file(path)
    remove_quietly(path)
    return data


def read_file(path: str) -> bytes:
    """The bytes of ``path``."""
    with open(path, "rb") as handle:
        return handle.read()


def floor_write(path: str, data: bytes, dir_fd: int) -> None:
    """Temp file + write + fsync + rename + directory fsync, with plain os calls."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    os.fsync(dir_fd)


async def time_floor(data: bytes, n: int, path: str) -> list[float]:
    """Seconds of ``n`` floor writes, each run in a worker thread and awaited from the loop."""
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        await asyncio.to_thread(floor_write, path, data, dir_fd)
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            await asyncio.to_thread(floor_write, path, data, dir_fd)
            ts.append(time.perf_counter() - t0)
    finally:
        os.close(dir_fd)
    return ts


def run(bench: Bench) -> None:
    """Measure P1, print its tables and store its results under ``P1``."""
    s = bench.s
    snaps = bench.runner.run(real_snapshots(s.p1_sizes, s.payload))
    path = os.path.join(s.workdir, "p1.json")
    data = {size: bench.runner.run(file_bytes_of_save(snap, path)) for size, snap in snaps.items()}
    samples: dict[tuple[int, str], list[float]] = {}
    lg_samples: dict[str, list[float]] = {"none": [], "sqlite": []}
    p1_repeats = s.p1_repeats
    for rep in range(p1_repeats):
        # Ours and the floor alternate block by block at each size; LangGraph once a repeat.
        for i, size in enumerate(s.p1_sizes):
            for name in rotated(["file", "memory", "floor"], rep + i):
                if name == "floor":
                    coro = time_floor(data[size], s.p1_saves, path)
                else:
                    coro = time_saves(name, snaps[size], s.p1_saves, path)
                gc.collect()
                ts = bench.runner.run(coro)
                samples.setdefault((size, name), []).append(median(ts))
        if s.langgraph:
            for mode in rotated(["none", "sqlite"], rep):
                r = bench.gc_run(
                    lambda m=mode: run_langgraph(m, s.p1_lg_steps, s.payload, s.workdir)
                )
                lg_samples[mode].append(median_interval(r))
    remove_quietly(path)
    rows = []
    res: dict[str, Any] = {"sizes": {}}
    worst = 0.0
    for size in s.p1_sizes:
        floor = median(samples[(size, "floor")])
        ours = median(samples[(size, "file")])
        mem = median(samples[(size, "memory")])
        ratio = ours / floor
        worst = max(worst, ratio)
        snap_bytes = len(encode(snaps[size]).encode())
        res["sizes"][size] = {
            "snapshot_bytes": snap_bytes,
            "file_bytes": len(data[size]),
            "floor_s": floor,
            "filestore_s": ours,
            "memory_s": mem,
            "filestore_over_floor": ratio,
            "repeats": {k[1]: v for k, v in samples.items() if k[0] == size},
        }
        rows.append(
            [
                fmt_bytes(size),
                fmt_bytes(snap_bytes),
                fmt_bytes(len(data[size])),
                fmt_time(floor),
                fmt_time(ours),
                fmt_ratio(ratio),
                fmt_time(mem),
                fmt_ratio(mem / floor),
                verdict(ratio, GOALS["P1_floor"]),
            ]
        )
    print(
        "\n## P1 per durable boundary, small state: one Checkpoint.save of a real snapshot"
        f" (goal: FileStore <= {GOALS['P1_floor']}x the floor; >= 3x lower than LangGraph"
        " SqliteSaver per step)"
    )
    print(
        f"median of {p1_repeats} interleaved repeats, each the median of {s.p1_saves} saves;"
        " floor = the same file bytes to temp + fsync + rename + dir fsync, plain os calls"
        " in a worker thread (InMemoryStore is not durable: shown for its CPU cost only)\n"
    )
    headers = ["state", "snapshot", "file bytes", "floor", "FileStore save", "x floor"]
    headers += ["InMemoryStore save", "x floor", "verdict"]
    print(table(headers, rows))
    res["worst_filestore_over_floor"] = worst
    if s.langgraph:
        none, sqlite = median(lg_samples["none"]), median(lg_samples["sqlite"])
        added = sqlite - none
        res["langgraph"] = {
            "steps": s.p1_lg_steps,
            "per_step_none_s": none,
            "per_step_sqlite_s": sqlite,
            "added_per_step_s": added,
            "ours_over_langgraph": {
                size: res["sizes"][size]["filestore_s"] / added for size in s.p1_sizes
            },
            "repeats": lg_samples,
        }
        print(
            f"\nLangGraph SqliteSaver (durability=sync), the anchor graph run for"
            f" {s.p1_lg_steps} steps x {fmt_bytes(s.payload)} so its state stays <= 64 KiB:"
            f" median step {fmt_time(sqlite)} vs {fmt_time(none)} without a checkpointer,"
            f" so {fmt_time(added)} added per step (goal: ours <= 1/3 of it)\n"
        )
        rows = []
        for size in s.p1_sizes:
            ours = res["sizes"][size]["filestore_s"]
            ratio = ours / added
            rows.append(
                [
                    fmt_bytes(size),
                    fmt_time(ours),
                    fmt_time(added),
                    fmt_ratio(ratio),
                    verdict(ratio, GOALS["P1_langgraph"]),
                ]
            )
        headers = ["state", "FileStore save", "LangGraph added per step", "ours / LangGraph"]
        print(table([*headers, "verdict"], rows))
    else:
        print(f"\nLangGraph column skipped: {s.lg_skipped}")
    bench.results["P1"] = res


# ---------------------------------------------------------------- P2

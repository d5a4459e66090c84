"""The journal configuration: is journal-first available, its restore child, its profile.

The configuration itself is ``run_ours("journal", ...)`` in ``checkpoint_workload``: a real
``run_tasks`` with a ``FileStore`` checkpoint and ``journal=JournalOptions(JsonlRunJournal(path,
flush_interval_ms=0), durable=True)``. Until journal-first durability (D10) is available in the
checkout, ``durable=True`` is refused with a ``ConfigurationError``; the bench then runs the
journal in OMA's best-effort mode (``durable=False``) and says so in every table that shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence

from checkpoint_report import fmt_time
from checkpoint_settings import Bench
from checkpoint_workload import RUN_ID, Trace, bench_agent, remove_quietly, run_ours

from oma_actors import CheckpointOptions, OpenMultiAgent, Team
from oma_actors.actors import event_loop_factory
from oma_actors.checkpoint import Checkpoint, CheckpointSnapshot
from oma_actors.errors import ConfigurationError
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal
from oma_actors.llm import Message
from oma_actors.orchestration.journal_setup import resolve_journal
from oma_actors.stores import FileStore

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint_child.py")


def durable_available() -> bool:
    """Whether this checkout accepts ``JournalOptions(durable=True)`` (journal-first, D10)."""
    try:
        resolve_journal(JournalOptions(InMemoryRunJournal(), durable=True))
    except ConfigurationError:
        return False
    return True


def child_restore(args: argparse.Namespace) -> None:
    """Restore the captured run; print seconds from here (after import) to the first model call.

    With ``args.journal`` the restore folds that journal's tail (the journal configuration).
    """
    prof = cProfile.Profile() if args.profile else None
    # ``event_loop_factory`` imports uvloop: an import, not timed (as LangGraph's child imports
    # its modules before its clock starts).
    loop_factory = event_loop_factory()
    t0, c0 = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    trace = Trace()

    def on_first(n: int, messages: Sequence[Message]) -> None:
        # CPU seconds of the process (its threads too) beside the wall clock: on a shared,
        # loaded machine the wall clock also counts time other processes held the CPUs.
        t1, c1 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.disable()
            print_stats(prof, 30)
        out = {"seconds": t1 - t0, "cpu_seconds": c1 - c0, "messages": len(messages)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        os._exit(0)

    async def go() -> None:
        agent = bench_agent(1, args.payload, trace, on_first, max_turns=args.turns + 10)
        options = CheckpointOptions(store=FileStore(args.store), run_id=RUN_ID)
        journal = None
        if args.journal:
            backend = JsonlRunJournal(args.journal, flush_interval_ms=0)
            journal = JournalOptions(backend, durable=bool(int(args.durable or "1")))
        await OpenMultiAgent().restore(Team("bench", [agent]), checkpoint=options, journal=journal)

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(go())
    sys.stdout.write(json.dumps({"error": "the restored run made no model call"}) + "\n")


def child_load(args: argparse.Namespace) -> None:
    """Only open the FileStore and load + decode the snapshot (a part of child_restore)."""
    loop_factory = event_loop_factory()  # imports uvloop: not timed, as in ``child_restore``
    t0, c0 = time.perf_counter(), time.process_time()
    t1 = c1 = 0.0

    async def go() -> CheckpointSnapshot | None:
        nonlocal t1, c1
        async with FileStore.open(args.store) as store:
            loaded = await Checkpoint(store, run_id=RUN_ID).load_latest()
            # Stamped here, as the restore child stamps its first model call: neither the
            # store's close nor the loop's teardown is part of what a restore does first.
            t1, c1 = time.perf_counter(), time.process_time()
            return loaded

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        snapshot = runner.run(go())
    n = len(snapshot.in_flight[0].state.conversation) if snapshot and snapshot.in_flight else 0
    print(json.dumps({"seconds": t1 - t0, "cpu_seconds": c1 - c0, "messages": n}))


def print_stats(prof: cProfile.Profile, top: int) -> None:
    """Print the top entries by own time, then the top ``oma_actors`` ones by cumulative time."""
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print("```text")
    print(out.getvalue().strip())
    print("```")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(r"oma_actors", top)
    print("\ntop oma_actors entries by cumulative time\n\n```text")
    print(out.getvalue().strip())
    print("```")


def profile_restore(bench: Bench) -> None:
    """cProfile one restore child of the journal configuration's captured long run (P5)."""
    s = bench.s
    src = bench.shared.restore_sources.get("journal")
    if src is None or not os.path.exists(src + ".json"):
        print("\n(no captured journal run: the restore profile needs P3 or P5)")
        return
    work = os.path.join(s.workdir, "restore-profile")
    shutil.copyfile(src + ".json", work + ".json")
    shutil.copyfile(src + ".jsonl", work + ".jsonl")
    cmd = [sys.executable, CHILD, "--_child", "restore", "--_store", work + ".json"]
    cmd += ["--_journal", work + ".jsonl", "--_durable", str(int(bench.shared.durable))]
    cmd += ["--_turns", str(s.long_turns), "--_payload", str(s.payload), "--_profile", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    print(
        f"\n## profile: restore of the journal configuration's {s.long_turns}-turn run in a fresh"
        " process (P5), after import -> first model call, under cProfile\n"
    )
    print(p.stdout.strip() or f"child failed: rc={p.returncode} {p.stderr[-600:]}")
    for suffix in (".json", ".jsonl"):
        remove_quietly(work + suffix)


def profile(bench: Bench, turns: int, top: int = 25) -> None:
    """cProfile one run of the journal configuration; print the top entries by own time.

    The profile covers the whole run (the scripted model and the tool are nearly free), so its
    top entries are the journal-mode save path: observing the state, building the snapshot,
    folding and comparing it, encoding the events, the append and its fsync (in a worker
    thread: the profile shows the loop waiting on it), and the compactions.
    """
    s = bench.s
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    r = bench.runner.run(
        run_ours("journal", turns, s.payload, s.workdir, durable=bench.shared.durable)
    )
    prof.disable()
    elapsed = time.perf_counter() - t0
    print(
        f"\n## profile: the journal configuration, {turns} turns, {fmt_time(elapsed)} under"
        f" cProfile ({fmt_time(r.per_turn)} per turn), saves {r.saves}; top {top} by own time\n"
    )
    print_stats(prof, top)
    profile_restore(bench)

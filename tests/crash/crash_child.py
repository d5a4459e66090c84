"""The child process of the crash tests (crash matrix 3.2): one scenario against a FileStore.

Run as ``python tests/crash/crash_child.py --scenario NAME --state-dir D --ledger-dir L
[--resume] [--crash POINT] [--tool-mode MODE] [--gate GATE] [--approval SCOPE] [--journal J]``.
It builds the scenario (``crash_scenarios``), runs it (or restores it with ``--resume``) against
``D/store.json`` (or the database ``--store URI`` names) and writes the ledgers the parent asserts over (``crash_ledger``). With
``--journal J`` the run (and its restore) saves journal-first (decision D10): a durable JSONL
journal at ``J``, every append fsynced before the boundary counts as saved
(``flush_interval_ms=0``), the snapshot in the store written only at compaction points. ``J``
may also be a database URI (``open_journal``): with ``--store`` the same URI, the journal is a
table of the store's own database (D15).

``--crash`` names where the process dies (``crash_wiring``): usually a durable boundary of the
run, spelled ``boundary:phase[:nth][@task_id]`` and driven by the test kit's ``crash_at``, so
the matrix does not depend on how the run is saved; otherwise a point inside a tool, the model,
a progress hook or the FileStore's rename.

``python tests/crash/crash_child.py decide --store F --id ID --hash H --decision approve|reject
--reviewer NAME [--crash before|after]`` is a reviewer process instead: it records one decision
with ``decide_approval`` (optionally crashing around the ledger's compare-and-set) and prints the
outcome as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from crash_ledger import RESULT, result_record
from crash_scenarios import (
    APPROVAL_SCOPES,
    CHECKPOINT_KEY,
    GOAL,
    RUN_ID,
    SCENARIOS,
    STORE_FILE,
    TOOL_MODES,
    build_team,
    make_gates,
    tasks_for,
)
from crash_tool import ToolBehaviour
from crash_wiring import (
    NO_CRASH,
    CrashPlan,
    TearingJournal,
    make_sink,
    patch_replace,
    plan_crash,
)

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    DurableApprovalError,
    OpenMultiAgent,
    StoreError,
    Team,
    TeamRunResult,
    open_store,
)
from oma_actors.approvals import APPROVAL_KEY_PREFIX, Reviewer, decide_approval
from oma_actors.clock import to_iso
from oma_actors.errors import CheckpointNotFoundError, JournalDamagedError, JournalUnavailableError
from oma_actors.journal import JournalOptions, JsonlRunJournal, RunJournal, open_journal
from oma_actors.stores import FileStore
from oma_actors.stores.base import MemoryStore
from oma_actors.testing.crash_points import crash_at
from oma_actors.testing.faults import CrashingStore


async def stored_attempt(store: MemoryStore) -> int | None:
    """``identity.attempt`` of the stored checkpoint (None: no checkpoint)."""
    entry = await store.get(CHECKPOINT_KEY)
    return int(json.loads(entry.value)["identity"]["attempt"]) if entry is not None else None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The child's command line; creates the state and ledger directories."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", required=True, choices=SCENARIOS)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--ledger-dir", required=True, type=Path)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--no-tasks", action="store_true", help="restore without tasks")
    parser.add_argument("--crash", type=plan_crash, default=NO_CRASH, metavar="POINT")
    parser.add_argument("--tool-mode", default="default", choices=TOOL_MODES)
    parser.add_argument("--gate", choices=("q_before_effect", "q_after_effect", "a_before_effect"))
    parser.add_argument("--approval", choices=APPROVAL_SCOPES, help="the gate that suspends")
    parser.add_argument(
        "--store", help="a database store URI (sqlite://, postgresql://) instead of D/store.json"
    )
    parser.add_argument(
        "--journal",
        help="save journal-first to this journal: a JSONL path, or a database URI (open_journal)",
    )
    parser.add_argument(
        "--on-damaged-journal", choices=("refuse", "salvage"), default="refuse",
        help="restore's on_damaged_journal (D15)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    args.ledger_dir.mkdir(parents=True, exist_ok=True)
    return args


async def main(args: argparse.Namespace) -> int:
    """Run or restore the scenario (inside the crash point, if any) and write ``result.json``."""
    async with contextlib.AsyncExitStack() as stack:
        store: MemoryStore
        if args.store is None:
            store = FileStore(args.state_dir / STORE_FILE)
            stack.push_async_callback(store.aclose)
        else:
            store = await stack.enter_async_context(open_store(args.store))
        return await run_main(args, store)


async def run_main(args: argparse.Namespace, store: MemoryStore) -> int:
    """``main`` on an open store (the caller closes it)."""
    ledger: Path = args.ledger_dir
    crash: CrashPlan = args.crash
    previous = await stored_attempt(store)

    behaviour = ToolBehaviour(
        mode=args.tool_mode,
        crash=crash.tool,
        gate=args.gate,
        run_attempt=(previous or 0) + 1 if args.resume else 1,
        q_effect_done=asyncio.Event(),
    )
    team, coordinator = build_team(args.scenario, ledger, behaviour, crash_on=crash.model)
    if crash.replace_kill is not None:
        assert isinstance(store, FileStore), "a crash inside the rename needs a FileStore (C06)"
        patch_replace(store.path, CHECKPOINT_KEY, kill=crash.replace_kill)
    journal: RunJournal | None = None
    if args.journal is not None and "://" in args.journal:
        # A database journal (D15): an append returns once its batch's transaction committed.
        journal = open_journal(args.journal)
    elif args.journal is not None:
        # flush_interval_ms=0: each boundary's append is written and fsynced on its own, so a
        # crash right after a boundary finds exactly that boundary's events on disk.
        journal = JsonlRunJournal(args.journal, flush_interval_ms=0)
        if crash.journal_tear is not None:
            journal = TearingJournal(journal, Path(args.journal), tear=crash.journal_tear)
    orchestrator = OpenMultiAgent(
        on_progress=make_sink(ledger, crash.hook),
        max_concurrency=1,
        journal=JournalOptions(journal, durable=True) if journal is not None else None,
        **make_gates(ledger, args.approval),
    )
    options = CheckpointOptions(store=store, run_id=RUN_ID)
    if crash.boundary is None:
        result = await run_or_restore(args, orchestrator, team, coordinator, options)
    else:
        with crash_at(crash.boundary, on_crash=crash.on_crash) as probe:
            result = await run_or_restore(args, orchestrator, team, coordinator, options)
        # Still alive: say what the run did report, so a misnamed or missing boundary (or a
        # wrong task id) is plain in the failing test's output.
        seen = ", ".join(f"{p.boundary}:{p.phase}@{p.task_id}" for p in probe.seen)
        print(
            f"crash point {crash.boundary.spelling} never reached; reported: {seen}",
            file=sys.stderr,
        )
    if journal is not None:
        await journal.close()  # the caller owns the journal (JournalOptions)
    (ledger / RESULT).write_text(json.dumps(result_record(result), indent=1, sort_keys=True))
    return 0


REFUSED_EXIT = 3
"""The exit code of a restore that refused with a typed error (D15): the error is the result."""


async def main_or_not_found(args: argparse.Namespace) -> int:
    """``main``, recording a restore that found nothing to restore (D12) as its result.

    A restore refused for its journal (D15: unavailable, damaged, unreadable) records the
    error's type and message as its result and exits ``REFUSED_EXIT``.
    """
    try:
        return await main(args)
    except CheckpointNotFoundError as exc:
        record = {"error": type(exc).__name__, "key": exc.key, "tasks": {}}
        (args.ledger_dir / RESULT).write_text(json.dumps(record, indent=1, sort_keys=True))
        return 0
    except (JournalUnavailableError, JournalDamagedError, StoreError) as exc:
        record = {"error": type(exc).__name__, "message": str(exc), "tasks": {}}
        (args.ledger_dir / RESULT).write_text(json.dumps(record, indent=1, sort_keys=True))
        return REFUSED_EXIT


async def run_or_restore(
    args: argparse.Namespace,
    orchestrator: OpenMultiAgent,
    team: Team,
    coordinator: AgentConfig,
    options: CheckpointOptions,
) -> TeamRunResult:
    """The scenario's run (``run_tasks`` or ``run_team``), or its restore with ``--resume``."""
    team_mode = args.scenario == "team"
    if args.resume:
        tasks = None if (args.no_tasks or team_mode) else tasks_for(args.scenario)
        try:
            return await orchestrator.restore(
                team, tasks, checkpoint=options, coordinator=coordinator,
                on_damaged_journal=args.on_damaged_journal,
            )  # fmt: skip
        except CheckpointNotFoundError:
            if not team_mode or args.no_tasks:
                raise
            # Nothing was checkpointed before the crash: the application plans again.
            return await orchestrator.run_team(
                team, GOAL, checkpoint=options, coordinator=coordinator
            )
    if team_mode:
        return await orchestrator.run_team(team, GOAL, checkpoint=options, coordinator=coordinator)
    return await orchestrator.run_tasks(team, tasks_for(args.scenario), checkpoint=options)


# -- the reviewer process -----------------------------------------------------------------------


def parse_decide_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line of the reviewer process (``crash_child.py decide ...``)."""
    parser = argparse.ArgumentParser(prog="crash_child.py decide")
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--id", required=True, dest="request_id")
    parser.add_argument("--hash", required=True, dest="request_hash")
    parser.add_argument("--decision", required=True, choices=("approve", "reject"))
    parser.add_argument("--reviewer", required=True)
    parser.add_argument("--crash", choices=("before", "after"))
    return parser.parse_args(argv)


async def decide_main(args: argparse.Namespace) -> int:
    """Record one decision with ``decide_approval``; print the outcome as one JSON line.

    With ``--crash`` the ledger's compare-and-set on the approval row is wrapped in a
    CrashingStore (``before``: the decision never lands; ``after``: it landed, the reviewer
    never hears so). This stays a store-level fault on purpose: a reviewer's decision is a
    write of the approval ledger in a process that runs no run, so no run boundary (and no
    ``RunWriter``) is involved (crash matrix C11c). Exit codes: 0 decided (or the same decision
    was already there), 1 refused (the ``DurableApprovalError`` code is printed), 86 crashed.
    """
    file_store = FileStore(args.store)
    store: MemoryStore = file_store
    if args.crash is not None:
        store = CrashingStore(
            file_store, prefix=APPROVAL_KEY_PREFIX, op="compare_and_set", when=args.crash
        )
    try:
        record = await decide_approval(
            store,
            request_id=args.request_id,
            request_hash=args.request_hash,
            decision=args.decision,
            reviewer=Reviewer(args.reviewer),
        )
    except DurableApprovalError as exc:
        print(json.dumps({"pid": os.getpid(), "error": exc.code, "message": str(exc)}))
        return 1
    finally:
        await file_store.aclose()
    decision = record.decision
    assert decision is not None
    outcome = {
        "pid": os.getpid(),
        "decision": decision.decision,
        "reviewer": decision.reviewer.id,
        "decided_at": to_iso(decision.decided_at),
    }
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["decide"]:
        sys.exit(asyncio.run(decide_main(parse_decide_args(sys.argv[2:]))))
    sys.exit(asyncio.run(main_or_not_found(parse_args())))

"""The child process of the lease crash tests (crash matrix C13a-d): one worker on a SQLite store.

``python tests/crash/lease_child.py run --db F --ledger L --clock C --owner NAME [--resume]
[--tool-mode default|unsafe] [--crash POINT | --pause POINT] [--crash-acquire before|after] [--go]``
runs the ``chain`` scenario of ``crash_scenarios`` (restores it with ``--resume``) as worker
``NAME`` of one run, owned through a run store on the same ``SqliteStore`` (cross-process
compare-and-set), so the fence and each snapshot are one transaction. The lease clock is the
file ``C`` (Unix seconds, written by the parent): the parent moves time, the lease never expires
by accident on a slow machine, and every process reads the same time.

``--crash POINT`` dies at a durable boundary (``crash_at``, M-exit). ``--pause POINT`` stops at
a boundary (``boundary:phase[@task]``) or inside the tool before its first effect
(``tool:before_effect``): the child prints ``READY <where>`` and blocks its whole event loop
reading stdin until the parent writes one byte (the parent SIGSTOPs it meanwhile, M-stop).
``--pause tool:hold`` waits for that byte in a thread instead, so the event loop (and the lease
heartbeat) runs on; a worker stopped while holding there exits once the parent closes stdin.
``--go`` blocks like a pause just before the run starts, so several workers can be released
together. ``--crash-acquire`` wraps the store in a ``CrashingStore`` that dies around the run
record's first compare-and-set, which is the lease acquisition (C13c).

The ledger tool is an "external system" that honours fencing tokens: it appends every call to
``effects.jsonl`` with ``ToolContext.fencing_token`` and refuses an effect whose token is lower
than one it has already accepted. Exit codes: 0 the run returned (its result is the last stdout
line, JSON), 3 the lease was refused (``{"error": code}``), 86 crashed, 87 the parent went away.

``--store URI`` runs on another store than ``--db``'s SQLite file (a PostgreSQL table, for the
takeover with the journal in the database); ``--journal`` makes the run journal-first on the
journal in the store's own database (``open_journal(URI)``, D15): with a lease, its per-turn
boundaries are fenced appends.

``python tests/crash/lease_child.py race --db F --clock C --owner NAME`` is a contender of the
acquire race: after ``READY`` it reads ``go <run_id> <unix start>`` lines, sleeps until the start
(so the contenders call ``acquire`` together) and answers each with one JSON line: the lease it
won or the refusal, and how many of its record swaps another process beat.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from crash_ledger import EFFECTS, append_line, read_jsonl, result_record
from crash_scenarios import RUN_ID, make_adapter, tasks_for
from crash_tool import LedgerArgs
from crash_wiring import make_sink
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    JournalOptions,
    LeaseError,
    OpenMultiAgent,
    Team,
    TeamRunResult,
    Tool,
    ToolContext,
    define_tool,
    open_journal,
    open_store,
)
from oma_actors.keyspace import RUN_KEY_PREFIX
from oma_actors.runs import MemoryStoreRunStore, RunLedger, RunStoreOptions
from oma_actors.runs.record import RunRecord
from oma_actors.stores import SqliteStore
from oma_actors.stores.base import AtomicStore
from oma_actors.testing.crash_points import CrashPoint, crash_at, exit_process
from oma_actors.testing.faults import CrashingStore

REFUSED_EXIT = 3
TOOL_PAUSE = "tool:before_effect"  # blocks the event loop: nothing else of the worker runs
TOOL_HOLD = "tool:hold"  # awaits the parent: the heartbeat (and everything else) goes on


def file_clock(path: Path) -> Callable[[], float]:
    """The lease clock: the Unix seconds the parent last wrote to ``path``."""
    return lambda: float(path.read_text())


def wait_for_parent(where: str) -> None:
    """Print ``READY <where>`` and block (the whole event loop) until the parent writes a byte."""
    os.write(1, f"READY {where}\n".encode())
    if not os.read(0, 1):
        os._exit(87)  # the parent is gone: do nothing more


def say(record: dict[str, Any]) -> None:
    """One JSON line on stdout, unbuffered."""
    os.write(1, (json.dumps(record, sort_keys=True) + "\n").encode())


@contextlib.contextmanager
def external_lock(ledger: Path) -> Iterator[None]:
    """The external system's own lock: its check and its write are one step."""
    fd = os.open(ledger / "external.lock", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def make_fenced_tool(ledger: Path, owner: str, *, unsafe: bool, pause: str | None) -> Tool:
    """The ledger tool: an external effect that refuses fencing tokens older than one it took.

    ``pause`` stops its first call before the effect: ``TOOL_PAUSE`` blocks the event loop,
    ``TOOL_HOLD`` awaits the parent's byte in a thread while the loop runs on.
    """
    effects = ledger / EFFECTS
    paused: list[str] = []

    def log(ctx: ToolContext, phase: str, label: str) -> None:
        record = {"pid": os.getpid(), "owner": owner, "phase": phase, "label": label}
        record.update(tool_call_id=ctx.tool_call_id, token=ctx.fencing_token)
        append_line(effects, record, sync=True)

    async def execute(args: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(args, LedgerArgs)
        log(ctx, "enter", args.label)
        if pause is not None and not paused:
            paused.append(args.label)
            if pause == TOOL_PAUSE:
                wait_for_parent(f"{TOOL_PAUSE} {args.label}")
            else:
                os.write(1, f"READY {TOOL_HOLD} {args.label}\n".encode())
                await asyncio.to_thread(os.read, 0, 1)
        with external_lock(ledger):
            taken = [line["token"] for line in read_jsonl(effects) if line["phase"] == "effect"]
            newest = max(taken, default=0)
            if ctx.fencing_token is None or ctx.fencing_token < newest:
                log(ctx, "refused", args.label)
                raise RuntimeError(f"stale fencing token {ctx.fencing_token} < {newest}")
            log(ctx, "effect", args.label)
        log(ctx, "return", args.label)
        return f"ok:{args.label}:{ctx.tool_call_id}"

    return define_tool(
        name="ledger",
        description="Records an external effect, fenced by the run's token.",
        input_model=LedgerArgs,
        execute=execute,
        effect="unsafe" if unsafe else "idempotent",
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of both modes (``run`` and ``race``)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=("run", "race"))
    parser.add_argument("--db", required=True, type=Path)
    parser.add_argument("--clock", required=True, type=Path)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--ttl", type=float, default=10.0, help="lease TTL, clock-file seconds")
    parser.add_argument("--ledger", type=Path)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--tool-mode", default="default", choices=("default", "unsafe"))
    parser.add_argument("--crash", type=CrashPoint.parse)
    parser.add_argument("--pause")
    parser.add_argument("--crash-acquire", choices=("before", "after"))
    parser.add_argument("--go", action="store_true", help="wait for the parent before the run")
    parser.add_argument("--store", help="a store URI instead of --db's SQLite file")
    parser.add_argument("--journal", action="store_true", help="journal-first, in the store's db")
    args = parser.parse_args(argv)
    if args.mode == "run":
        if args.ledger is None:
            parser.error("run needs --ledger")
        args.ledger.mkdir(parents=True, exist_ok=True)
    return args


async def run_main(args: argparse.Namespace) -> int:
    """One worker's run (or restore) of the chain scenario; see the module docstring."""
    async with contextlib.AsyncExitStack() as stack:
        return await run_worker(args, stack)


async def run_worker(args: argparse.Namespace, stack: contextlib.AsyncExitStack) -> int:
    """``run_main`` with its store and journal closed by ``stack``."""
    ledger: Path = args.ledger
    uri = args.store or f"sqlite://{args.db.resolve()}"
    store: AtomicStore
    if args.store is None:
        sqlite = await stack.enter_async_context(SqliteStore(args.db))
        store = sqlite
    else:
        store = await stack.enter_async_context(open_store(args.store))
    journal = None
    if args.journal:
        journal = open_journal(uri)
        stack.push_async_callback(journal.close)
    if args.crash_acquire is not None:
        # The run record's first compare-and-set is the acquisition (``RunStore.create``). The
        # wrapper forwards compare_and_set and apply because SQLite has them (a wrapper has
        # exactly its inner store's capabilities), which its static type cannot say.
        crashing = CrashingStore(
            store, prefix=RUN_KEY_PREFIX, op="compare_and_set", when=args.crash_acquire
        )
        store = cast("AtomicStore", crashing)
    in_tool = args.pause if args.pause in (TOOL_PAUSE, TOOL_HOLD) else None
    tool = make_fenced_tool(ledger, args.owner, unsafe=args.tool_mode == "unsafe", pause=in_tool)
    worker = AgentConfig("worker", adapter=make_adapter("chain", "worker", ledger), tools=[tool])
    team = Team("crash-team", [worker])
    runs = MemoryStoreRunStore(store, atomicity="cross-process")
    options = RunStoreOptions(
        runs, owner=args.owner, lease_ttl=args.ttl, heartbeat=True, clock=file_clock(args.clock)
    )
    orchestrator = OpenMultiAgent(
        on_progress=make_sink(ledger, None), max_concurrency=1, run_store=options
    )
    checkpoint = CheckpointOptions(store=store, run_id=RUN_ID)
    journaled = None if journal is None else JournalOptions(journal, durable=True)

    async def go() -> TeamRunResult:
        if args.resume:
            return await orchestrator.restore(
                team, tasks_for("chain"), checkpoint=checkpoint, journal=journaled
            )
        return await orchestrator.run_tasks(
            team, tasks_for("chain"), checkpoint=checkpoint, journal=journaled
        )

    if args.go:
        wait_for_parent("go")
    try:
        if args.crash is not None:
            with crash_at(args.crash, on_crash=exit_process):
                result = await go()
            print(f"crash point {args.crash.spelling} never reached", file=sys.stderr)
        elif args.pause is not None and in_tool is None:
            with crash_at(args.pause, on_crash=lambda point, at: wait_for_parent(point.spelling)):
                result = await go()
        else:
            result = await go()
    except LeaseError as exc:
        say({"pid": os.getpid(), "owner": args.owner, "error": exc.code, "message": str(exc)})
        return REFUSED_EXIT
    say({"owner": args.owner, **result_record(result)})
    return 0


class CountingRunStore(MemoryStoreRunStore):
    """The run store of a contender, counting the swaps it lost to another process."""

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store, atomicity="cross-process")
        self.swaps_lost = 0

    async def create(self, record: RunRecord) -> bool:
        """``RunStore.create``, counting a refusal (another process created it first)."""
        created = await super().create(record)
        self.swaps_lost += not created
        return created

    async def compare_and_set(self, run_id: str, expected_version: int, next: RunRecord) -> bool:
        """``RunStore.compare_and_set``, counting a refusal (another process wrote first)."""
        swapped = await super().compare_and_set(run_id, expected_version, next)
        self.swaps_lost += not swapped
        return swapped


async def race_main(args: argparse.Namespace) -> int:
    """A contender of the acquire race: one ``ledger.acquire`` per ``go <run_id>`` line."""
    async with SqliteStore(args.db) as store:
        runs = CountingRunStore(store)
        ledger = RunLedger(runs, owner=args.owner, lease_ttl=args.ttl, clock=file_clock(args.clock))
        os.write(1, b"READY race\n")
        for line in sys.stdin:  # blocking is fine: nothing else runs in this process
            _, run_id, start = line.split()
            await asyncio.sleep(max(0.0, float(start) - time.time()))  # all start together
            answer: dict[str, Any] = {"owner": args.owner, "run_id": run_id}
            before = runs.swaps_lost
            try:
                handle = await ledger.acquire(run_id, heartbeat=False)
            except LeaseError as exc:
                answer["error"] = exc.code
            else:
                answer.update(token=handle.fencing_token, attempt=handle.attempt)
                await handle.aclose()  # keep the lease (it runs out on the parent's clock)
            answer["swaps_lost"] = runs.swaps_lost - before
            say(answer)
    return 0


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    main = run_main if arguments.mode == "run" else race_main
    sys.exit(asyncio.run(main(arguments)))

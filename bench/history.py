"""D17 goals: `run_history` of a 1000-turn run; `state_at` and `fork_run` against a restore.

One journal-first run (FileStore + durable JSONL journal, one tool call per turn on the scripted
model) is made once; then each repeat measures every variant once, in an order that rotates
between repeats, and the table reports medians:

* ``restore``: what a restore reads before it runs anything: the latest snapshot
  (``Checkpoint.load_latest``), the run's journal tail (``read_journal_tail``) and its fold
  (``fold_tail``), of the finished run. This is the baseline of every ratio and of the goals:
  the strictest one (a finished run's restore decodes one snapshot and folds no tail).
* ``restore at mid`` / ``restore at last``: the same reads of the run as it was on disk at the
  middle and at the last point (its files copied, untimed, at the model call right after that
  point: a run that crashed there): what recovering at that point costs, beside which the
  ``x there`` column sets forking from it.
* ``run_history``: every point of the run (goal: at most 50 ms for 1000 turns).
* ``state_at mid`` / ``state_at last``: the state at the middle point (the results of the
  middle turn sent to the model) and at the last journal point (the last turn's) (goal: at most
  2x a restore).
* ``fork_run mid``: a fork at the middle point, a fresh child id per repeat, deleted again
  (untimed) so the store keeps the run's size (goal: at most 2x).

``--store sqlite`` makes the same run on a ``SqliteStore`` with its database's own journal
(``SqliteRunJournal`` of the same file, as the sidecar keeps a run on a SQLite store), and
``--store postgres`` on a ``PostgresStore`` table with its ``PostgresRunJournal`` (``--dsn``;
one warm store for every variant, and no "at mid/last" copies there): on both a restore reads
the run's one snapshot row, whatever history the database holds beside it.

Run: ``.venv/bin/python bench/history.py [--turns 1000] [--repeats 5] [--quick]
[--store file|sqlite|postgres] [--dsn postgresql://...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    JournalOptions,
    OpenMultiAgent,
    Task,
    Team,
    ToolContext,
    define_tool,
)
from oma_actors.checkpoint import (
    Checkpoint,
    fold_tail,
    fork_run,
    read_journal_tail,
    run_history,
    state_at,
)
from oma_actors.journal import JsonlRunJournal, PostgresRunJournal, SqliteRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore, SqliteStore
from oma_actors.stores.postgres import PostgresStore
from oma_actors.testing import ScriptedAdapter

_T = TypeVar("_T")

HISTORY_GOAL_MS = 50.0
RATIO_GOAL = 2.0


class Note(BaseModel):
    text: str


class Files:
    """Where a run lives: a FileStore and a JSONL journal, one SQLite database holding both, or
    one PostgreSQL table and its journal table."""

    def __init__(self, kind: str, root: Path, dsn: str = "") -> None:
        self.kind = kind
        self.root = root
        self.dsn = dsn
        self.table = f"oma_history_bench_{uuid.uuid4().hex[:12]}"
        self._shared: PostgresStore | None = None

    @property
    def path(self) -> Path:
        return self.root / ("state.json" if self.kind == "file" else "state.db")

    def store(self) -> Any:
        """A fresh store (no cache carried between variants); on PostgreSQL one store, whose
        connections stay open (it caches no value)."""
        if self.kind == "file":
            return FileStore(self.path)
        if self.kind == "sqlite":
            return SqliteStore(self.path)
        if self._shared is None:
            self._shared = PostgresStore(self.dsn, table=self.table)
        return self._shared

    def journal(self) -> Any:
        if self.kind == "file":
            return JsonlRunJournal(self.root / "run.jsonl", flush_interval_ms=0)
        if self.kind == "sqlite":
            return SqliteRunJournal(self.path)
        return PostgresRunJournal(self.dsn, store_table=self.table)

    def copy_to(self, target: Path) -> Files | None:
        """A copy of the run's files as they are now, in ``target`` (none on PostgreSQL)."""
        if self.kind == "postgres":
            return None
        target.mkdir()
        if self.kind == "file":
            for name in ("state.json", "run.jsonl"):
                shutil.copyfile(self.root / name, target / name)
        else:  # the database's committed state, through SQLite's own backup
            with sqlite3.connect(self.path) as source, sqlite3.connect(target / "state.db") as to:
                source.backup(to)
        return Files(self.kind, target)

    async def drop(self) -> None:
        """Close the PostgreSQL store and drop the tables this bench made."""
        if self._shared is None:
            return
        await self._shared.aclose()
        import asyncpg  # the postgres extra: only this store needs it

        connection = await asyncpg.connect(self.dsn)
        try:
            for suffix in ("", "_journal", "_journal_marks"):
                await connection.execute(f'DROP TABLE IF EXISTS "{self.table}{suffix}"')
        finally:
            await connection.close()


async def unreachable(dsn: str) -> str | None:
    """Why PostgreSQL at ``dsn`` cannot be used (``None``: it can): no driver, no server."""
    try:
        import asyncpg
    except ImportError:
        return "asyncpg is not installed (the postgres extra)"
    try:
        connection = await asyncpg.connect(dsn, timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return f"{type(exc).__name__}: {exc}"
    await connection.close()
    return None


async def closing(store: Any, action: Callable[[Any], Awaitable[_T]]) -> _T:
    """``action(store)``, the store closed after it when it is a SQLite store of its own."""
    try:
        return await action(store)
    finally:
        if isinstance(store, SqliteStore):
            await store.aclose()


def make_team(turns: int, at_call: Callable[[int], None] | None = None) -> Team:
    """The run's team; ``at_call(n)`` is called at each model call, after ``n`` tool turns."""

    async def note(args: Note, ctx: ToolContext) -> str:
        return "noted " + args.text * 20

    def answer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        n = sum(1 for m in messages if m.role == "assistant")
        if at_call is not None:
            at_call(n)
        if n < turns:
            return LLMResponse(
                [ToolUseBlock(f"c{n}", "note", {"text": f"t{n}"})], stop_reason="tool_use"
            )
        return LLMResponse([TextBlock("done")])

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    return Team(
        "t", [AgentConfig("w", adapter=ScriptedAdapter(answer), tools=[tool], max_turns=turns + 5)]
    )


async def make_run(files: Files, turns: int, captures: dict[int, Path]) -> dict[int, Files]:
    """Run ``turns`` tool turns; after ``n`` turns (a key of ``captures``), copy the run's files
    as they are at the next model call into ``captures[n]``; those copies, by ``n``."""
    copies: dict[int, Files] = {}

    def capture(n: int) -> None:
        if n in captures and n not in copies:
            copy = files.copy_to(captures[n])
            if copy is not None:
                copies[n] = copy

    journal = files.journal()
    store = files.store()
    try:
        result = await OpenMultiAgent().run_tasks(
            make_team(turns, capture),
            [Task("long", "x", assignee="w", id="t0")],
            checkpoint=CheckpointOptions(store=store, run_id="r1"),
            journal=JournalOptions(journal),
        )
    finally:
        await journal.close()
        if isinstance(store, SqliteStore):
            await store.aclose()
    assert result.success, result.status
    return copies


async def restore_read(files: Files) -> None:
    async def read(store: Any) -> None:
        snapshot = await Checkpoint(store, run_id="r1").load_latest()
        assert snapshot is not None
        journal = files.journal()
        try:
            fold_tail(snapshot, await read_journal_tail(journal, snapshot))
        finally:
            await journal.close()

    await closing(files.store(), read)


async def forget_forks(store: Any) -> None:
    """Delete the children ``fork_run`` wrote (untimed), so the store stays the run's size."""
    for entry in await store.list():
        if "/r1/" not in entry.key and entry.key.startswith(
            ("__oma_checkpoint__/", "__oma_history__/")
        ):
            await store.delete(entry.key)


async def timed(action: Callable[[], Coroutine[Any, Any, object]]) -> tuple[float, float]:
    """Wall and CPU milliseconds of ``action`` (CPU: the process, its reader threads too)."""
    started, cpu = time.perf_counter(), time.process_time()
    await action()
    return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000


async def main(turns: int, repeats: int, kind: str, dsn: str) -> int:
    if kind == "postgres" and (why := await unreachable(dsn)) is not None:
        print(f"skipped: PostgreSQL at {dsn} is not usable ({why})")
        return 0
    root = Path(tempfile.mkdtemp(prefix="oma-history-bench-"))
    files = Files(kind, root, dsn)
    try:
        return await measure(files, turns, repeats)
    finally:
        await files.drop()


async def measure(files: Files, turns: int, repeats: int) -> int:
    root = files.root
    print(f"making a {turns}-turn journal-first run ({files.kind}) in {root} ...", flush=True)
    captures = {turns // 2: root / "at-mid", turns: root / "at-last"}
    copies = await make_run(files, turns, captures)
    points = await closing(files.store(), lambda store: run_history(store, "r1"))
    # The n-th tool_results point is turn n's: the run as the model call after n turns saw it.
    results = [p.seq for p in points if p.boundary == "tool_results"]
    mid, last = results[turns // 2 - 1], results[-1]
    print(f"{len(points)} history points; mid seq {mid}, last journal point {last}")

    forks = iter(range(10_000))

    async def fork_once() -> None:
        child = f"f{next(forks)}"
        await closing(files.store(), lambda s: fork_run(s, "r1", at_seq=mid, new_run_id=child))

    variants: dict[str, Callable[[], Coroutine[Any, Any, object]]] = {
        "restore": lambda: restore_read(files)
    }
    for n, at in ((turns // 2, "mid"), (turns, "last")):
        if n in copies:
            variants[f"restore at {at}"] = lambda copy=copies[n]: restore_read(copy)
    variants |= {
        "run_history": lambda: closing(files.store(), lambda s: run_history(s, "r1")),
        "state_at mid": lambda: closing(files.store(), lambda s: state_at(s, "r1", mid)),
        "state_at last": lambda: closing(files.store(), lambda s: state_at(s, "r1", last)),
        "fork_run mid": fork_once,
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for repeat in range(repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for name in order:
            wall, used = await timed(variants[name])
            samples[name].append(wall)
            cpu[name].append(used)
            if name == "fork_run mid":
                await closing(files.store(), forget_forks)
    base = statistics.median(samples["restore"])
    base_cpu = statistics.median(cpu["restore"])
    # The restore of the run as it was at each point: set beside a fold to that point.
    there = {
        "state_at mid": "restore at mid",
        "state_at last": "restore at last",
        "fork_run mid": "restore at mid",
    }
    # CPU beside the wall clock: on a loaded, shared machine the wall clock also counts time
    # other processes held the CPUs; the goals are judged on the wall clock, against the
    # restore of the finished run.
    print(
        f"\n{'variant':<16}{'median ms':>11}{'x restore':>11}{'x there':>9}{'cpu ms':>9}"
        f"{'x cpu':>7}  goal"
    )
    for name in names:
        ms = statistics.median(samples[name])
        used = statistics.median(cpu[name])
        goal = ""
        if name == "run_history":
            goal = f"<= {HISTORY_GOAL_MS:.0f} ms: {'met' if ms <= HISTORY_GOAL_MS else 'MISSED'}"
        elif name in there:
            goal = f"<= {RATIO_GOAL}x: {'met' if ms / base <= RATIO_GOAL else 'MISSED'}"
        local = ""
        if there.get(name) in samples:
            local = f"{ms / statistics.median(samples[there[name]]):.2f}"
        print(
            f"{name:<16}{ms:>11.1f}{ms / base:>11.2f}{local:>9}{used:>9.1f}"
            f"{used / base_cpu:>7.2f}  {goal}"
        )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100 turns, 3 repeats")
    parser.add_argument("--store", choices=("file", "sqlite", "postgres"), default="file")
    parser.add_argument(
        "--dsn",
        default=os.environ.get(
            "OMA_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
        ),
        help="the PostgreSQL database of --store postgres",
    )
    args = parser.parse_args()
    turns, repeats = (100, 3) if args.quick else (args.turns, args.repeats)
    sys.exit(asyncio.run(main(turns, repeats, args.store, args.dsn)))

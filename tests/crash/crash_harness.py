"""The parent side of the crash tests: start children, read their ledgers and the store.

The parent never shares memory with a child: it reads the ledgers the child appended
(``crash_ledger``) and opens the store (and, journal-first, the journal) as a third party. A crash at a boundary is checked to have
happened *at that boundary*: the child names it on stderr (``crash_at``), so a test whose child
died somewhere else fails instead of asserting over the wrong state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from crash_ledger import EFFECTS, GATES, MODEL_CALLS, RESULT, events_file, read_jsonl
from crash_scenarios import CHECKPOINT_KEY, RUN_ID, STORE_FILE
from crash_wiring import append_bytes, plan_crash
from service_kit import POSTGRES_DSN

from oma_actors import open_store
from oma_actors.checkpoint import decode, encode, read_journal_tail
from oma_actors.journal import JsonlRunJournal, RunJournal, open_journal, to_json_line
from oma_actors.journal.fold import Folded, FoldResult, fold_tail
from oma_actors.journal.sql import SqlRunJournal
from oma_actors.stores import FileStore
from oma_actors.stores.base import MemoryStore
from oma_actors.testing.crash_points import CRASH_EXIT

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("crash_child.py")
CHILD_TIMEOUT = 60
APPROVAL_PREFIX = "__oma_approval__/"  # spelled out: the parent reads rows as a third party
JOURNAL_FILE = "journal.jsonl"
DATABASE_FILE = "state.db"
FILE_SAVES = ("snapshot", "journal")  # a FileStore: a snapshot per boundary, or journal-first
DATABASE_SAVES = ("sqlite", "postgresql")  # journal-first, the journal in the store's database
SAVES = FILE_SAVES + DATABASE_SAVES
JOURNAL_SAVES = ("journal", *DATABASE_SAVES)  # every journal-first save path (D10, D15)


@dataclass(frozen=True)
class Child:
    """One finished child process."""

    pid: int
    returncode: int
    stdout: str
    stderr: str


def run_process(cmd: list[str], *, expect: int, what: str) -> Child:
    """Run ``cmd`` from the repository root; any exit code but ``expect`` fails the test."""
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        pytest.fail(f"{what} timed out\nstderr:\n{stderr}")
    child = Child(proc.pid, proc.returncode, stdout, stderr)
    if child.returncode != expect:
        pytest.fail(
            f"{what} exited {child.returncode}, expected {expect}\n"
            f"stdout:\n{stdout}\nstderr:\n{stderr}"
        )
    return child


def boundary_of(crash: str | None) -> str | None:
    """The normalized boundary spelling of a ``--crash`` point (``None``: not a boundary)."""
    if crash is None:
        return None
    point = plan_crash(crash).boundary
    return point.spelling if point is not None else None


@dataclass
class Scenario:
    """A scenario's state and ledger directories, and the processes run against them."""

    root: Path
    name: str
    mode: str = "default"
    approval: str | None = None  # "tool" | "dispatch": the gate that suspends (every process)
    # "journal": every process runs with --journal (journal-first, D10) beside the FileStore;
    # "sqlite" / "postgresql:<table>": journal-first with the store and its journal in one
    # database (D15), a SQLite file in the state directory or a table of the test PostgreSQL.
    save: str = "snapshot"
    on_damaged: str | None = None  # a restore's --on-damaged-journal (D15)
    children: list[Child] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def ledger_dir(self) -> Path:
        return self.root / "ledger"

    @property
    def store_path(self) -> Path:
        return self.state_dir / STORE_FILE

    @property
    def journal_path(self) -> Path:
        return self.state_dir / JOURNAL_FILE

    @property
    def backend(self) -> str:
        """The save path without its table: one of :data:`SAVES`."""
        return self.save.partition(":")[0]

    @property
    def journaled(self) -> bool:
        return self.backend != "snapshot"

    @property
    def in_database(self) -> bool:
        """Whether the store and its journal are a database's (not a FileStore and a file)."""
        return self.backend in DATABASE_SAVES

    @property
    def store_uri(self) -> str:
        """The store the processes run against: the FileStore's path or a database URI."""
        if self.backend == "sqlite":
            return f"sqlite://{self.state_dir / DATABASE_FILE}"
        if self.backend == "postgresql":
            return f"{POSTGRES_DSN}?table={self.save.partition(':')[2]}"
        return str(self.store_path)

    @property
    def journal_uri(self) -> str:
        """The journal of a journal-first run: the JSONL file, or the store's own database."""
        return self.store_uri if self.in_database else str(self.journal_path)

    def command(
        self,
        *,
        crash: str | None = None,
        resume: bool = False,
        gate: str | None = None,
        no_tasks: bool = False,
        journal: bool | None = None,
    ) -> list[str]:
        """The child's command line; ``journal`` overrides the scenario's ``save`` (C12b)."""
        cmd = [sys.executable, str(CHILD), "--scenario", self.name]
        cmd += ["--state-dir", str(self.state_dir), "--ledger-dir", str(self.ledger_dir)]
        cmd += ["--tool-mode", self.mode]
        if self.in_database:
            cmd += ["--store", self.store_uri]
        if self.journaled if journal is None else journal:
            cmd += ["--journal", self.journal_uri]
        if resume:
            cmd.append("--resume")
            if self.on_damaged is not None:
                cmd += ["--on-damaged-journal", self.on_damaged]
        if no_tasks:
            cmd.append("--no-tasks")
        if crash is not None:
            cmd += ["--crash", crash]
        if gate is not None:
            cmd += ["--gate", gate]
        if self.approval is not None:
            cmd += ["--approval", self.approval]
        return cmd

    def run(
        self,
        *,
        crash: str | None = None,
        resume: bool = False,
        gate: str | None = None,
        no_tasks: bool = False,
        expect: int = 0,
        journal: bool | None = None,
    ) -> Child:
        """Run the child to its end; any exit code but ``expect`` fails with its stderr.

        A child crashed at a boundary must say it died at exactly that boundary.
        """
        what = f"child (scenario={self.name}, save={self.save}, crash={crash}, resume={resume})"
        cmd = self.command(
            crash=crash, resume=resume, gate=gate, no_tasks=no_tasks, journal=journal
        )
        child = run_process(cmd, expect=expect, what=what)
        self.children.append(child)
        boundary = boundary_of(crash)
        if boundary is not None and expect == CRASH_EXIT:
            said = f"crash_at: os._exit({CRASH_EXIT}) at {boundary} ("
            assert said in child.stderr, f"{what} did not die at {boundary}:\n{child.stderr}"
        return child

    def run_until_ready_then_kill(self, *, crash: str, gate: str | None = None) -> Child:
        """M-kill: wait for the child's ``READY`` line, then SIGKILL it."""
        proc = subprocess.Popen(
            self.command(crash=crash, gate=gate),
            cwd=ROOT,
            stdin=subprocess.PIPE,  # the child blocks reading it; we never write
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        timer = threading.Timer(CHILD_TIMEOUT, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            ready = line.startswith("READY")
            if ready:
                os.kill(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        finally:
            timer.cancel()
        if not ready:
            pytest.fail(f"child never reported READY (exit {proc.returncode})\nstderr:\n{stderr}")
        boundary = boundary_of(crash)
        if boundary is not None:
            assert line.startswith(f"READY {boundary} ("), line
        child = Child(proc.pid, proc.returncode, line + stdout, stderr)
        self.children.append(child)
        assert child.returncode == -signal.SIGKILL
        return child

    # -- ledgers and state -----------------------------------------------------------------

    def effects(self, pid: int | None = None) -> list[dict[str, Any]]:
        lines = read_jsonl(self.ledger_dir / EFFECTS)
        return [line for line in lines if pid is None or line["pid"] == pid]

    def model_calls(self, pid: int | None = None) -> list[dict[str, Any]]:
        lines = read_jsonl(self.ledger_dir / MODEL_CALLS)
        return [line for line in lines if pid is None or line["pid"] == pid]

    def events(self, pid: int) -> list[dict[str, Any]]:
        return read_jsonl(self.ledger_dir / events_file(pid))

    def result(self) -> dict[str, Any]:
        return dict(json.loads((self.ledger_dir / RESULT).read_text()))

    def gate_calls(self, pid: int | None = None) -> list[dict[str, Any]]:
        """Every call of the approval gates (``gates.jsonl``), optionally of one process."""
        lines = read_jsonl(self.ledger_dir / GATES)
        return [line for line in lines if pid is None or line["pid"] == pid]

    def approval_rows(self) -> dict[str, dict[str, Any]]:
        """Every ``__oma_approval__/<id>`` row, read as a third party (plain JSON)."""
        if self.in_database:
            entries = self.dump()[0]
            return {
                key.removeprefix(APPROVAL_PREFIX): dict(json.loads(value))
                for key, value in entries
                if key.startswith(APPROVAL_PREFIX)
            }
        return read_approval_rows(self.store_path)

    def snapshot(self) -> dict[str, Any] | None:
        """The stored checkpoint, read as a third party through a freshly opened store.

        Journal-first this is the last compaction, stale by design: use ``state``.
        """
        if self.in_database:
            entries = dict(self.dump()[0])
            value = entries.get(CHECKPOINT_KEY)
            return dict(json.loads(value)) if value is not None else None
        return read_checkpoint(self.store_path)

    def dump(self) -> tuple[list[tuple[str, str]], list[str]]:
        """Everything durable, to compare before and after a process: a database's store
        entries by key and its run's journal rows, or the bytes of a FileStore and its JSONL
        journal."""
        if self.in_database:
            return asyncio.run(dump_database(self.store_uri))
        files = [self.store_path, self.journal_path]
        texts = [path.read_text() if path.exists() else "" for path in files]
        return [(str(self.store_path), texts[0])], texts[1:]

    def state(self) -> dict[str, Any] | None:
        """The checkpoint a restore resumes from: the snapshot, journal-first with its tail folded.

        Fails the test when the tail does not fold (only C12a expects a discarded tail).
        """
        return folded_state(self.fold())

    def started_calls(self) -> set[str]:
        """The call ids the journal tail shows as started (``tool/call`` or ``tool/result``)."""
        folded = self.fold()
        return {call.call_id for call in folded.started_calls} if folded is not None else set()

    def fold(self) -> FoldResult | None:
        """The snapshot folded with the journal's tail (``fold_tail``); ``None``: no snapshot.

        With ``save="snapshot"`` the tail is empty, whatever lies in the directory: that is
        what a restore without the journal resumes from (C12b).
        """
        journal = self.journal_uri if self.journaled else None
        return asyncio.run(fold_store(self.store_uri, journal))

    def journal_lines(self) -> list[dict[str, Any]]:
        """Every complete line of the journal file (every row of the run in a database
        journal, by seq), parsed as plain JSON (a third party)."""
        if self.in_database:
            return [dict(json.loads(payload)) for payload in self.dump()[1]]
        if not self.journal_path.exists():
            return []
        lines = self.journal_path.read_bytes().split(b"\n")
        return [dict(json.loads(line)) for line in lines[:-1] if line.strip()]

    def add_journal_line(self, line: dict[str, Any]) -> None:
        """A hostile edit: ``line`` appended to the journal as a complete event, behind the
        runtime's back (a JSONL line, or a row of the run in the database's journal table)."""
        text = json.dumps(line)
        if not self.in_database:
            append_bytes(self.journal_path, (text + "\n").encode())
            return
        asyncio.run(insert_journal_row(self.store_uri, int(line["seq"]), text))

    # -- reviewers -------------------------------------------------------------------------

    def decide(
        self,
        request_id: str,
        request_hash: str,
        decision: str = "approve",
        *,
        reviewer: str = "reviewer-1",
        crash: str | None = None,
        expect: int = 0,
    ) -> tuple[Child, dict[str, Any]]:
        """A reviewer process: ``decide_approval`` on this scenario's store (``crash_child decide``).

        Returns the child and the JSON line it printed (``{}`` when it crashed).
        """
        cmd = [sys.executable, str(CHILD), "decide", "--store", str(self.store_path)]
        cmd += ["--id", request_id, "--hash", request_hash, "--decision", decision]
        cmd += ["--reviewer", reviewer]
        if crash is not None:
            cmd += ["--crash", crash]
        child = run_process(cmd, expect=expect, what=f"reviewer {decision} crash={crash}")
        self.children.append(child)
        lines = child.stdout.strip().splitlines()
        return child, (dict(json.loads(lines[-1])) if lines else {})

    def decide_with_cli(
        self,
        request_id: str,
        request_hash: str,
        decision: str,
        *,
        reviewer: str = "reviewer-1",
        expect: int = 0,
    ) -> Child:
        """A reviewer process using the ``oma approvals decide`` command line."""
        cmd = [sys.executable, "-m", "oma_actors.cli.main", "approvals", "decide", request_id]
        cmd += ["--store", str(self.store_path), f"--{decision}", "--reviewer", reviewer]
        cmd += ["--hash", request_hash]
        child = run_process(cmd, expect=expect, what=f"oma approvals decide --{decision}")
        self.children.append(child)
        return child


# -- the store, read as a third party -------------------------------------------------------------


def read_approval_rows(store_path: Path) -> dict[str, dict[str, Any]]:
    """``request id -> parsed record`` of every approval row in the FileStore file at ``path``.

    Read with ``json`` only (a third party that shares no code with the runtime); an absent
    file has no rows.
    """
    if not store_path.exists():
        return {}
    document = json.loads(store_path.read_bytes())
    rows: dict[str, dict[str, Any]] = {}
    for entry in document["entries"]:
        key = str(entry["key"])
        if key.startswith(APPROVAL_PREFIX):
            rows[key.removeprefix(APPROVAL_PREFIX)] = dict(json.loads(entry["value"]))
    return rows


async def load_checkpoint(path: Path) -> dict[str, Any] | None:
    """The checkpoint JSON stored in the FileStore at ``path`` (``None``: no checkpoint)."""
    entry = await FileStore(path).get(CHECKPOINT_KEY)
    return dict(json.loads(entry.value)) if entry is not None else None


def folded_state(folded: FoldResult | None) -> dict[str, Any] | None:
    """A fold's snapshot as checkpoint JSON; fails the test when the tail was discarded."""
    if folded is None:
        return None
    assert isinstance(folded, Folded), f"the journal tail was discarded: {folded.reason}"
    return dict(json.loads(encode(folded.snapshot)))


async def insert_journal_row(store_uri: str, seq: int, payload: str) -> None:
    """Insert one row of the run into the journal table of the database ``store_uri`` names."""
    journal = open_journal(store_uri)
    assert isinstance(journal, SqlRunJournal)
    table = journal.table
    await journal.close()
    if store_uri.startswith("sqlite://"):
        with contextlib.closing(sqlite3.connect(store_uri.removeprefix("sqlite://"))) as db, db:
            db.execute(f'INSERT INTO "{table}" VALUES (?, ?, ?)', (RUN_ID, seq, payload))
        return
    import asyncpg

    connection = await asyncpg.connect(store_uri.partition("?")[0])
    try:
        await connection.execute(f'INSERT INTO "{table}" VALUES ($1, $2, $3)', RUN_ID, seq, payload)
    finally:
        await connection.close()


def journal_at(uri: str) -> RunJournal:
    """The journal ``uri`` names: a JSONL path, or a database's (``open_journal``)."""
    return JsonlRunJournal(uri) if "://" not in uri else open_journal(uri)


@contextlib.asynccontextmanager
async def store_at(uri: str) -> AsyncIterator[MemoryStore]:
    """The store ``uri`` names, as a third party opens it: a FileStore path or a database."""
    if "://" not in uri:
        yield FileStore(uri)  # never locked nor created by this reader
        return
    async with open_store(uri) as store:
        yield store


async def fold_store(store_uri: str, journal_uri: str | None) -> FoldResult | None:
    """The stored snapshot folded with the journal tail (no or an absent journal: no tail)."""
    async with store_at(store_uri) as store:
        entry = await store.get(CHECKPOINT_KEY)
    if entry is None:
        return None
    snapshot = decode(entry.value, key=CHECKPOINT_KEY)
    events = []
    if journal_uri is not None:
        journal = journal_at(journal_uri)
        try:
            events = await read_journal_tail(journal, snapshot)
        finally:
            await journal.close()
    return fold_tail(snapshot, events)


async def dump_database(store_uri: str) -> tuple[list[tuple[str, str]], list[str]]:
    """``Scenario.dump`` of a database: its store's entries by key, its run's journal rows."""
    async with open_store(store_uri) as store:
        entries = sorted((entry.key, entry.value) for entry in await store.list())
    journal = open_journal(store_uri)
    assert isinstance(journal, SqlRunJournal)
    try:
        return entries, [to_json_line(event) for event in await journal.read_run(RUN_ID)]
    finally:
        await journal.close()


def read_checkpoint(path: Path) -> dict[str, Any] | None:
    """``load_checkpoint`` from synchronous code (a third party opening the store)."""
    return asyncio.run(load_checkpoint(path))

"""The parent side of the lease crash tests (C13a-d): workers, the shared clock, the store's audit.

A ``World`` is one run's SQLite database, its ledgers and the lease clock file every worker
reads (``lease_child.py``). The parent owns time: the lease never expires because a loaded
machine was slow, only because the test moved the clock past it.

The store is read as a third party with ``sqlite3``. Before any worker starts, the parent adds
an ``audit`` table and triggers to the database: every insert, update and delete of a key lands
in the audit **in the same transaction** as the write itself, from whichever process wrote it.
A snapshot written under the fence is one ``apply`` of ``[run record, snapshot]``, so the audit
row right before each snapshot row is the run record that fenced it, naming the owner and token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pytest
from crash_ledger import EFFECTS, MODEL_CALLS, events_file, read_jsonl
from crash_scenarios import CHECKPOINT_KEY, RUN_ID

from oma_actors.stores import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("lease_child.py")
RUN_KEY_PREFIX = "__oma_run__/"  # spelled out: the parent reads the store as a third party
RUN_KEY = f"{RUN_KEY_PREFIX}{RUN_ID}"
T0 = 1_750_000_000.0  # the lease clock's start (Unix seconds)
TTL = 10.0  # lease TTL in clock-file seconds
WAIT = 45.0  # the longest any single wait on a child may take (a loaded 2-core machine)

_AUDIT = """
CREATE TABLE audit (n INTEGER PRIMARY KEY AUTOINCREMENT, op TEXT, key TEXT, value TEXT);
CREATE TRIGGER audit_insert AFTER INSERT ON oma_kv
  BEGIN INSERT INTO audit (op, key, value) VALUES ('insert', new.key, new.value); END;
CREATE TRIGGER audit_update AFTER UPDATE ON oma_kv
  BEGIN INSERT INTO audit (op, key, value) VALUES ('update', new.key, new.value); END;
CREATE TRIGGER audit_delete AFTER DELETE ON oma_kv
  BEGIN INSERT INTO audit (op, key, value) VALUES ('delete', old.key, NULL); END;
"""


@dataclass(frozen=True)
class Finished:
    """A worker that exited: its code, its stdout lines and its stderr."""

    pid: int
    returncode: int
    lines: list[str]
    stderr: str

    @property
    def answer(self) -> dict[str, Any]:
        """The JSON of the last stdout line (the run's result or the refusal)."""
        return dict(json.loads(self.lines[-1])) if self.lines else {}


@dataclass
class Worker:
    """A running ``lease_child.py``: its stdout lines arrive on a queue as they are written."""

    name: str
    proc: subprocess.Popen[bytes]
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self._errors: list[bytes] = []
        # Both pipes are drained as the child writes, so a chatty child never blocks on them.
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._errors.extend, args=(self.proc.stderr,), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self.lines.put(raw.decode().rstrip("\n"))
        self.lines.put(None)

    def next_line(self) -> str | None:
        """The next stdout line (``None`` at end of output); fails the test after ``WAIT``."""
        try:
            line = self.lines.get(timeout=WAIT)
        except queue.Empty:
            self.kill()
            pytest.fail(f"worker {self.name} said nothing for {WAIT}s; saw {self.seen}")
        if line is not None:
            self.seen.append(line)
        return line

    def wait_ready(self, where: str = "") -> str:
        """Wait for the worker's ``READY <where>...`` line."""
        line = self.next_line()
        if line is None or not line.startswith(f"READY {where}"):
            finished = self.finish(expect=None)
            pytest.fail(f"worker {self.name}: expected READY {where}, got {line!r}: {finished}")
        return line

    def release(self) -> None:
        """Let a worker blocked at ``READY`` go on (one byte on its stdin)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def send(self, text: str) -> None:
        """Write one line to the worker's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def finish(self, expect: int | None = 0) -> Finished:
        """Close stdin, wait for the exit; any exit code but ``expect`` fails with the stderr."""
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ProcessLookupError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"worker {self.name} did not exit within {WAIT}s; saw {self.seen}")
        while self.next_line() is not None:
            pass
        self._close_pipes()
        stderr = b"".join(self._errors).decode()
        done = Finished(self.pid, self.proc.returncode, self.seen, stderr)
        if expect is not None and done.returncode != expect:
            pytest.fail(
                f"worker {self.name} exited {done.returncode}, expected {expect}\n"
                f"stdout: {done.lines}\nstderr:\n{done.stderr}"
            )
        return done

    def kill(self) -> None:
        """SIGCONT then SIGKILL, if still running (test teardown)."""
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)
                os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=WAIT)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pump in self._pumps:
            pump.join(timeout=WAIT)  # the process is gone: its pipes are at end of file
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(BrokenPipeError):
                    pipe.close()


class World:
    """One run's database, ledgers and lease clock, and the workers started against them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "state" / "run.sqlite"
        self.ledger = root / "ledger"
        self.clock = root / "clock"
        self.ledger.mkdir(parents=True)
        self.workers: list[Worker] = []
        self.set_clock(T0)
        asyncio.run(_create(self.db))
        with contextlib.closing(self._connect()) as connection:
            connection.executescript(_AUDIT)

    # -- time ---------------------------------------------------------------------------------

    def set_clock(self, unix: float) -> None:
        """Set the lease clock every worker reads (atomically: a reader never sees half)."""
        temp = self.clock.with_suffix(".tmp")
        temp.write_text(repr(unix))
        os.replace(temp, self.clock)

    def now(self) -> float:
        return float(self.clock.read_text())

    def advance(self, seconds: float) -> None:
        self.set_clock(self.now() + seconds)

    def expires(self) -> str | None:
        """The ``lease.expiresAt`` of the run record (``None``: no record or no lease)."""
        record = self.record() or {}
        return (record.get("lease") or {}).get("expiresAt")

    # -- workers ------------------------------------------------------------------------------

    def spawn(self, owner: str, *options: str, mode: str = "run", ttl: float = TTL) -> Worker:
        """Start a worker (``lease_child.py run`` or ``race``) named ``owner``."""
        cmd = [sys.executable, str(CHILD), mode, "--db", str(self.db), "--clock", str(self.clock)]
        cmd += ["--owner", owner, "--ttl", repr(ttl)]
        if mode == "run":
            cmd += ["--ledger", str(self.ledger)]
        proc = subprocess.Popen(
            [*cmd, *options],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        worker = Worker(owner, proc)
        self.workers.append(worker)
        return worker

    def run(self, owner: str, *options: str, expect: int = 0, ttl: float = TTL) -> Finished:
        """Start a worker and wait for it to exit with ``expect``."""
        return self.spawn(owner, *options, ttl=ttl).finish(expect)

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        """Poll ``condition`` until it holds; fail after ``WAIT`` seconds naming ``what``."""
        deadline = time.monotonic() + WAIT
        while not condition():
            if time.monotonic() > deadline:
                pytest.fail(f"gave up waiting for {what}")
            time.sleep(0.02)

    def stop(self, worker: Worker) -> None:
        """SIGSTOP ``worker`` at a moment it holds no SQLite write lock (M-stop).

        A worker stopped inside a write transaction would make every other writer wait out the
        busy timeout; a stopped worker that holds no lock is exactly a stalled lease holder.
        """
        for _ in range(200):
            os.kill(worker.pid, signal.SIGSTOP)
            _wait_state(worker.pid, "T")
            if self._write_lock_free():
                return
            os.kill(worker.pid, signal.SIGCONT)
            time.sleep(0.01)
        pytest.fail(f"worker {worker.name} kept the database locked")

    def cont(self, worker: Worker) -> None:
        """SIGCONT a stopped worker."""
        os.kill(worker.pid, signal.SIGCONT)

    def close(self) -> None:
        """Kill whatever still runs (a failing test must not leave processes behind)."""
        for worker in self.workers:
            worker.kill()

    # -- the store, read as a third party -----------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.db, timeout=WAIT, isolation_level=None)

    def _write_lock_free(self) -> bool:
        connection = sqlite3.connect(self.db, timeout=0, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            connection.close()

    def dump(self) -> dict[str, str]:
        """Every key and value in the store."""
        with contextlib.closing(self._connect()) as connection:
            return dict(connection.execute("SELECT key, value FROM oma_kv").fetchall())

    def journal_rows(self) -> list[tuple[int, int, str]]:
        """``(seq, attempt, type)`` of every event of the run in the journal table, by seq."""
        query = "SELECT seq, payload FROM oma_kv_journal WHERE run_id = ? ORDER BY seq"
        with contextlib.closing(self._connect()) as connection:
            try:
                rows = connection.execute(query, (RUN_ID,)).fetchall()
            except sqlite3.OperationalError:  # no table yet: no run journaled here
                return []
        return [(seq, json.loads(p)["attempt"], json.loads(p)["type"]) for seq, p in rows]

    def record(self) -> dict[str, Any] | None:
        """The run record (OMA's JSON), or ``None``."""
        value = self.dump().get(RUN_KEY)
        return None if value is None else dict(json.loads(value))

    def snapshot(self) -> dict[str, Any] | None:
        """The stored checkpoint snapshot, or ``None``."""
        value = self.dump().get(CHECKPOINT_KEY)
        return None if value is None else dict(json.loads(value))

    def audit(self) -> list[tuple[int, str, str, str | None]]:
        """Every write that landed, in commit order: ``(n, op, key, value)``."""
        with contextlib.closing(self._connect()) as connection:
            return list(connection.execute("SELECT n, op, key, value FROM audit ORDER BY n"))

    def record_writes(self, since: int = 0, run_id: str = RUN_ID) -> list[dict[str, Any]]:
        """Every write of ``run_id``'s record after audit row ``since``: owner, token, ..."""
        return [
            _record_row(n, value)
            for n, _, key, value in self.audit()
            if n > since and key == f"{RUN_KEY_PREFIX}{run_id}" and value is not None
        ]

    def snapshot_writes(self, since: int = 0) -> list[dict[str, Any]]:
        """Every snapshot write after audit row ``since``, with the record write that fenced it.

        ``fenced_by`` is the run record written in the same transaction just before it (its
        owner and token), or ``None`` when the snapshot was written without one.
        """
        rows = self.audit()
        found = []
        for index, (n, _, key, value) in enumerate(rows):
            if n <= since or key != CHECKPOINT_KEY or value is None:
                continue
            previous = rows[index - 1] if index else None
            fence = None
            if previous is not None and previous[2] == RUN_KEY and previous[3] is not None:
                fence = _record_row(previous[0], previous[3])
            snapshot = json.loads(value)
            found.append(
                {
                    "n": n,
                    "revision": snapshot["revision"],
                    "attempt": snapshot["identity"]["attempt"],
                    "fenced_by": fence,
                }
            )
        return found

    def last_audit(self) -> int:
        """The number of the newest audit row (0: nothing written yet)."""
        rows = self.audit()
        return rows[-1][0] if rows else 0

    # -- ledgers ------------------------------------------------------------------------------

    def effects(self, pid: int | None = None) -> list[dict[str, Any]]:
        lines = read_jsonl(self.ledger / EFFECTS)
        return [line for line in lines if pid is None or line["pid"] == pid]

    def model_calls(self, pid: int | None = None) -> list[dict[str, Any]]:
        lines = read_jsonl(self.ledger / MODEL_CALLS)
        return [line for line in lines if pid is None or line["pid"] == pid]

    def events(self, pid: int) -> list[dict[str, Any]]:
        return read_jsonl(self.ledger / events_file(pid))


def iso(unix: float) -> str:
    """Unix seconds as OMA's timestamps (``toISOString``), rounded to the millisecond as the
    ledger rounds its clock."""
    ms = round(unix * 1000)
    seconds = datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{seconds}.{ms % 1000:03d}Z"


def _record_row(n: int, value: str) -> dict[str, Any]:
    record = json.loads(value)
    lease = record.get("lease") or {}
    return {
        "n": n,
        "version": record["version"],
        "status": record["status"],
        "token": record["fencingToken"],
        "attempt": record["attempt"],
        "owner": lease.get("owner"),
        "expires": lease.get("expiresAt"),
    }


async def _create(db: Path) -> None:
    """Create the database with the store's own schema (the audit is added on top)."""
    async with SqliteStore(db):
        pass


def _wait_state(pid: int, state: str) -> None:
    """Wait until ``/proc/<pid>/stat`` shows ``state`` (``T``: stopped by a signal)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == state:
            return
        time.sleep(0.002)
    pytest.fail(f"process {pid} never reached state {state}")

"""The parent side of the crash tests: start children, read their ledgers, shared checks (3.5)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from crash_child import CHECKPOINT_KEY, RUN_ID, STORE_FILE, read_jsonl

from oma_actors import FileStore

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("crash_child.py")
CHILD_TIMEOUT = 60

CallKey = tuple[str, str, str, int]  # (agent, role, task, turn)
APPROVAL_PREFIX = "__oma_approval__/"  # spelled out: the parent reads rows as a third party


@dataclass(frozen=True)
class Child:
    """One finished child process."""

    pid: int
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Scenario:
    """A scenario's state and ledger directories, and the processes run against them."""

    root: Path
    name: str
    mode: str = "default"
    approval: str | None = None  # "tool" | "dispatch": the gate that suspends (every process)
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

    def command(
        self,
        *,
        crash: str | None = None,
        resume: bool = False,
        gate: str | None = None,
        no_tasks: bool = False,
    ) -> list[str]:
        cmd = [
            sys.executable,
            str(CHILD),
            "--scenario",
            self.name,
            "--state-dir",
            str(self.state_dir),
            "--ledger-dir",
            str(self.ledger_dir),
            "--tool-mode",
            self.mode,
        ]
        if resume:
            cmd.append("--resume")
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
    ) -> Child:
        """Run the child to its end; any exit code but ``expect`` fails with its stderr."""
        proc = subprocess.Popen(
            self.command(crash=crash, resume=resume, gate=gate, no_tasks=no_tasks),
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
            pytest.fail(f"child timed out (crash={crash}, resume={resume})\nstderr:\n{stderr}")
        child = Child(proc.pid, proc.returncode, stdout, stderr)
        self.children.append(child)
        if child.returncode != expect:
            pytest.fail(
                f"child exited {child.returncode}, expected {expect} "
                f"(scenario={self.name}, crash={crash}, resume={resume})\nstderr:\n{stderr}"
            )
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
        child = Child(proc.pid, proc.returncode, line + stdout, stderr)
        self.children.append(child)
        assert child.returncode == -signal.SIGKILL
        return child

    # -- ledgers and state -----------------------------------------------------------------

    def effects(self, pid: int | None = None) -> list[dict[str, Any]]:
        lines = read_jsonl(self.ledger_dir / "effects.jsonl")
        return [line for line in lines if pid is None or line["pid"] == pid]

    def model_calls(self, pid: int | None = None) -> list[dict[str, Any]]:
        lines = read_jsonl(self.ledger_dir / "model_calls.jsonl")
        return [line for line in lines if pid is None or line["pid"] == pid]

    def events(self, pid: int) -> list[dict[str, Any]]:
        return read_jsonl(self.ledger_dir / f"events-{pid}.jsonl")

    def result(self) -> dict[str, Any]:
        return dict(json.loads((self.ledger_dir / "result.json").read_text()))

    def gate_calls(self, pid: int | None = None) -> list[dict[str, Any]]:
        """Every call of the approval gates (``gates.jsonl``), optionally of one process."""
        lines = read_jsonl(self.ledger_dir / "gates.jsonl")
        return [line for line in lines if pid is None or line["pid"] == pid]

    def lost_writes(self) -> list[dict[str, Any]]:
        """The checkpoint writes a ``store:*:before`` crash stopped, with their pending approvals."""
        return read_jsonl(self.ledger_dir / "lost_writes.jsonl")

    def approval_rows(self) -> dict[str, dict[str, Any]]:
        """Every ``__oma_approval__/<id>`` row, read as a third party (plain JSON)."""
        return read_approval_rows(self.store_path)

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
        cmd = [
            sys.executable,
            str(CHILD),
            "decide",
            "--store",
            str(self.store_path),
            "--id",
            request_id,
            "--hash",
            request_hash,
            "--decision",
            decision,
            "--reviewer",
            reviewer,
        ]
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
        cmd = [
            sys.executable,
            "-m",
            "oma_actors.cli.main",
            "approvals",
            "decide",
            request_id,
            "--store",
            str(self.store_path),
            f"--{decision}",
            "--reviewer",
            reviewer,
            "--hash",
            request_hash,
        ]
        child = run_process(cmd, expect=expect, what=f"oma approvals decide --{decision}")
        self.children.append(child)
        return child

    def snapshot(self) -> dict[str, Any] | None:
        """The stored checkpoint, read as a third party through a fresh ``FileStore``."""
        return read_checkpoint(self.store_path)


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


def read_checkpoint(path: Path) -> dict[str, Any] | None:
    """``load_checkpoint`` from synchronous code (a third party opening the store)."""
    return asyncio.run(load_checkpoint(path))


# -- counting -----------------------------------------------------------------------------------


def effect_counts(effects: list[dict[str, Any]], phase: str = "effect") -> Counter[str]:
    """How many lines of ``phase`` each tool call id has."""
    return Counter(line["tool_call_id"] for line in effects if line["phase"] == phase)


def call_keys(calls: list[dict[str, Any]]) -> Counter[CallKey]:
    """Model calls as a multiset of ``(agent, role, task, turn)``."""
    return Counter((c["agent"], c["role"], c["task"], c["turn"]) for c in calls)


def in_flight(snapshot: dict[str, Any], title: str = "alpha") -> dict[str, Any] | None:
    """The in-flight entry of the task titled ``title``."""
    ids = {task["title"]: task["id"] for task in snapshot["queue"]["tasks"]}
    for entry in snapshot.get("inFlightTasks") or []:
        if entry["taskId"] == ids.get(title):
            return dict(entry)
    return None


def completed_titles(snapshot: dict[str, Any]) -> set[str]:
    ids = set(snapshot["queue"]["completed"])
    return {task["title"] for task in snapshot["queue"]["tasks"] if task["id"] in ids}


def of_type(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == name]


# -- baselines ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """An uninterrupted run of a scenario (in its own process)."""

    result: dict[str, Any]
    calls: list[dict[str, Any]]
    effects: list[dict[str, Any]]

    @property
    def call_keys(self) -> Counter[CallKey]:
        return call_keys(self.calls)

    def seen(self, task: str, turn: int) -> list[Any]:
        """The tool results the model was shown at ``task``'s ``turn``."""
        [call] = [c for c in self.calls if c["task"] == task and c["turn"] == turn]
        return list(call["seen"])


GetBaseline = Callable[..., Baseline]
"""The ``baseline`` fixture: ``baseline(scenario, mode="default") -> Baseline``."""


def run_baseline(root: Path, name: str, mode: str) -> Baseline:
    sc = Scenario(root, name, mode)
    child = sc.run()
    assert sc.result()["success"] is True
    return Baseline(sc.result(), sc.model_calls(child.pid), sc.effects(child.pid))


# -- the checks of matrix 3.5 -------------------------------------------------------------------


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result without what legitimately differs between processes (pid, ids, attempt)."""
    tasks = {
        title: {key: value for key, value in task.items() if key != "id"}
        for title, task in result["tasks"].items()
    }
    return {
        "success": result["success"],
        "status": result["status"],
        "tasks": tasks,
        "coordinator": result["coordinator"],
    }


def assert_same_results(
    result: dict[str, Any], baseline: Baseline, *, total_usage: bool = True
) -> None:
    """Statuses, outputs, turns, token usage and tool records equal the uninterrupted run's.

    ``total_usage=False`` skips the run's total token usage (see
    ``test_c09b_restored_team_run_keeps_the_planning_usage`` for why run_team needs it).
    """
    assert comparable(result) == comparable(baseline.result)
    if total_usage:
        assert result["token_usage"] == baseline.result["token_usage"]


def assert_revisions(sc: Scenario, before: int, after: int, p1: Child, p2: Child) -> None:
    """Revisions only grow: within each process, and P2 continues right after P1's last save."""
    assert after > before
    saved1 = [e["revision"] for e in of_type(sc.events(p1.pid), "CheckpointSaved")]
    saved2 = [e["revision"] for e in of_type(sc.events(p2.pid), "CheckpointSaved")]
    assert saved1 == sorted(set(saved1))
    assert saved2 == sorted(set(saved2))
    assert not saved1 or max(saved1) <= before
    assert saved2, "the restoring process saved nothing"
    assert saved2[0] == before + 1
    assert max(saved2) <= after


def assert_resumed(
    sc: Scenario,
    p1: Child,
    p2: Child,
    base: Baseline,
    before: dict[str, Any],
    *,
    extra_calls: Counter[CallKey] | None = None,
    same_results: bool = True,
    total_usage: bool = True,
    earlier: tuple[Child, ...] = (),
) -> dict[str, Any]:
    """The checks every crash-and-restore test makes (matrix 3.5, items 2-5 and 8).

    ``before`` is the checkpoint P1 left behind. Returns the checkpoint P2 left behind.
    ``earlier`` are processes of the same run before P1 (say, the one that suspended before a
    reviewer decided): their model calls count in the union too.
    """
    after = sc.snapshot()
    assert after is not None
    result = sc.result()
    calls1, calls2 = sc.model_calls(p1.pid), sc.model_calls(p2.pid)
    calls0 = [call for child in earlier for call in sc.model_calls(child.pid)]

    # 2. Model calls: the union is the script plus the documented re-asks, nothing more.
    union = call_keys(calls0) + call_keys(calls1) + call_keys(calls2)
    assert union == base.call_keys + (extra_calls or Counter())
    # ... and P2 never asks again for a turn whose assistant message was saved.
    for title in completed_titles(before):
        assert not [c for c in calls2 if c["task"] == title], f"{title} completed before the crash"
    for entry_title in {task["title"] for task in before["queue"]["tasks"]}:
        entry = in_flight(before, entry_title)
        if entry is None:
            continue
        asked = [c["turn"] for c in calls2 if c["role"] == "worker" and c["task"] == entry_title]
        if entry["phase"] == "completed":
            assert asked == [], f"{entry_title} had its final answer saved"
        else:
            assert all(turn >= entry["turns"] for turn in asked), (entry_title, asked, entry)

        # 3. Accounting continues from the saved values (it does not restart at 0).
        final = result["tasks"][entry_title]
        assert final["turns"] >= entry["turns"]
        saved_usage = [entry["tokenUsage"]["input_tokens"], entry["tokenUsage"]["output_tokens"]]
        assert final["usage"][0] >= saved_usage[0]
        assert final["usage"][1] >= saved_usage[1]

    # 4. Identity: same run id, attempt + 1, read by a third party from the store.
    assert before["identity"]["runId"] == after["identity"]["runId"] == RUN_ID
    assert result["run_id"] == RUN_ID
    assert after["identity"]["attempt"] == before["identity"]["attempt"] + 1
    assert result["attempt"] == after["identity"]["attempt"]

    # 5. Revisions only increase.
    assert_revisions(sc, before["revision"], after["revision"], p1, p2)

    # 8. Events are at-least-once overall and at most once per process.
    for pid in (p1.pid, p2.pid):
        done = Counter(e["task_id"] for e in of_type(sc.events(pid), "TaskCompleted"))
        assert all(count == 1 for count in done.values()), done
    # Tasks the queue had completed before the crash are skipped by the restore without an event
    # (see test_c08_task_completed_event_is_at_least_once for that window).
    finished = {
        e["task_id"] for pid in (p1.pid, p2.pid) for e in of_type(sc.events(pid), "TaskCompleted")
    }
    expected = {t["id"] for t in result["tasks"].values() if t["status"] == "completed"}
    assert expected - set(before["queue"]["completed"]) <= finished <= expected

    if same_results:
        assert_same_results(result, base, total_usage=total_usage)
    assert result["success"] is True
    return after

"""``oma runs list``: checkpoints and run records of one store, side by side."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.runs import Lease, MemoryStoreRunStore, RunRecord
from oma_actors.stores import SqliteStore
from oma_actors.testing import ScriptedAdapter


async def _populate(path: Path) -> None:
    async with SqliteStore(path) as store:
        team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(
            [LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))]
        ))])  # fmt: skip
        runs = MemoryStoreRunStore(store, atomicity="cross-process")
        await OpenMultiAgent(run_store=runs).run_tasks(
            team, [Task("a", "x")], checkpoint=CheckpointOptions(store=store, run_id="owned")
        )
        await store.set("__oma_run__/broken", "{not json")


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


async def _died_mid_run(path: Path) -> None:
    """A run with a checkpoint whose worker died: its record still says ``running``, under a
    lease that expired 12 seconds ago (nothing writes a death down)."""
    async with SqliteStore(path) as store:
        team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(
            [LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))]
        ))])  # fmt: skip
        await OpenMultiAgent().run_tasks(
            team, [Task("a", "x")], checkpoint=CheckpointOptions(store=store, run_id="dead")
        )
        now = datetime.now(UTC)
        lease = Lease("worker-gone", now - timedelta(seconds=72), now - timedelta(seconds=12))
        await MemoryStoreRunStore(store).create(
            RunRecord(run_id="dead", version=1, status="running", attempt=1, fencing_token=1,
                      lease=lease, created_at=lease.acquired_at, updated_at=lease.acquired_at)
        )  # fmt: skip


def test_runs_list_joins_checkpoint_and_record_and_lists_unreadable_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    asyncio.run(_populate(path))
    listed = oma("runs", "list", "--store", f"sqlite://{path}", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["run_id"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == {"owned", "broken"}
    owned = rows["owned"]
    assert owned["checkpoint"]["status"] == "completed"
    assert (owned["record"]["status"], owned["record"]["fencing_token"]) == ("completed", 1)
    assert owned["record"]["owner"] is None  # a completed run holds no lease
    assert rows["broken"]["record"]["status"] == "unreadable"
    assert "checkpoint" not in rows["broken"]
    table = oma("runs", "list", "--store", f"sqlite://{path}")
    assert table.returncode == 0, table.stderr
    assert "owned" in table.stdout
    assert "unreadable" in table.stdout


def test_runs_of_a_missing_store_create_none_and_an_empty_store_says_so(tmp_path: Path) -> None:
    absent = tmp_path / "mistyped.json"
    missing = oma("runs", "list", "--store", str(absent))
    assert missing.returncode == 2
    assert f"no store file at {absent}" in missing.stderr
    assert not absent.exists()  # a mistyped path never becomes a new empty store
    empty = tmp_path / "state.json"
    empty.write_text('{"version":1,"entries":[]}')
    listed = oma("runs", "list", "--store", str(empty))
    assert (listed.returncode, listed.stdout.strip()) == (0, "no runs in the store")


def test_a_running_record_whose_lease_expired_is_listed_and_shown_as_not_live(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    asyncio.run(_died_mid_run(path))
    expired = re.compile(r"running \(lease expired \d+s ago\)")
    listed = oma("runs", "list", "--store", f"sqlite://{path}", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["record"]["status"] == "running"  # the stored word, as stored
    assert row["record"]["live"] is False
    assert expired.fullmatch(row["record"]["state"])
    table = oma("runs", "list", "--store", f"sqlite://{path}")
    assert table.returncode == 0, table.stderr
    assert expired.search(table.stdout)
    shown = oma("runs", "show", "dead", "--store", f"sqlite://{path}")
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if line.startswith("record: "))
    assert re.fullmatch(
        r"record: running \(lease expired \d+s ago\), owner worker-gone, attempt 1, "
        r"fencing token 1",
        line,
    )
    as_json = oma("runs", "show", "dead", "--store", f"sqlite://{path}", "--json")
    assert as_json.returncode == 0, as_json.stderr
    record = json.loads(as_json.stdout)["record"]
    assert (record["status"], record["live"]) == ("running", False)
    assert expired.fullmatch(record["state"])

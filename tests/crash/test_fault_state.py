"""Fault rows F06, F07, F10 and F13-F15 (crash-matrix.md 3.4): bad durable state and misuse.

A corrupt or tampered store file, a failing read during restore, a cancelled tool, a checkpoint
without a run id and concurrent writes to one FileStore key. F06 and F15 are about the
FileStore's bytes themselves, so they write and read those bytes directly.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from crash_checks import GetBaseline, comparable, effect_counts, in_flight
from crash_harness import load_checkpoint
from crash_ledger import result_record
from crash_scenarios import CHECKPOINT_KEY, STORE_FILE, build_team, tasks_for
from crash_tool import ToolBehaviour
from fault_harness import Harness, edit_checkpoint, write_store_file

from oma_actors import CheckpointError, ConfigurationError, OpenMultiAgent, StoreError
from oma_actors.errors import CorruptStoreError, RunIdMismatchError, UnsupportedSchemaError
from oma_actors.events import ToolCalled
from oma_actors.stores import FileStore
from oma_actors.testing.faults import FailingStore

# -- F06 ----------------------------------------------------------------------------------------

CORRUPTIONS: dict[str, Any] = {
    "garbage": lambda valid: b"\x00\xff this is not json",
    "truncated": lambda valid: valid[: len(valid) // 2],
    "zero_bytes": lambda valid: b"",
    "not_an_object": lambda valid: b"[]",
    "no_entries": lambda valid: b'{"version":1}',
    "entry_without_value": lambda valid: json.dumps(
        {
            "version": 1,
            "entries": [{"key": CHECKPOINT_KEY, "createdAt": "2026-01-01T00:00:00.000Z"}],
        }
    ).encode(),
    "non_object_metadata": lambda valid: json.dumps(
        {
            "version": 1,
            "entries": [
                {"key": "k", "value": "v", "metadata": 5, "createdAt": "2026-01-01T00:00:00.000Z"}
            ],
        }
    ).encode(),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
async def test_f06_corrupt_store_file_is_never_read_as_empty(
    tmp_path: Path, crashed_store: bytes, corruption: str
) -> None:
    h = Harness(tmp_path)
    data = CORRUPTIONS[corruption](crashed_store)
    write_store_file(h.path, data)
    # A typed error of the store family, never "no checkpoint" (which would start fresh).
    with pytest.raises(CorruptStoreError):
        await h.restore(FileStore(h.path), tasks=tasks_for("chain"))
    assert h.calls() == []
    assert h.effects() == []
    assert h.path.read_bytes() == data  # nothing overwritten
    with pytest.raises(CorruptStoreError):
        await FileStore(h.path).get(CHECKPOINT_KEY)


async def test_f06_only_orphan_temp_files_mean_a_fresh_store(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    h = Harness(tmp_path)
    orphan = h.path.with_name(f"{STORE_FILE}.tmp-999999999-1")
    write_store_file(orphan, b'{"version":1,"entr')
    result = await h.restore(FileStore(h.path), tasks=tasks_for("chain"))
    assert result.attempt == 1
    assert comparable(result_record(result)) == comparable(base.result)
    assert not orphan.exists()


# -- F07 ----------------------------------------------------------------------------------------


def foreign_run(snapshot: dict[str, Any]) -> None:
    snapshot["identity"]["runId"] = "someone-else"


def future_version(snapshot: dict[str, Any]) -> None:
    snapshot["version"] = 99


def commit_for_another_call(snapshot: dict[str, Any]) -> None:
    [entry] = snapshot["inFlightTasks"]
    entry["pendingToolCalls"][0]["commit"]["result"]["tool_use_id"] = "not-this-call"


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (foreign_run, RunIdMismatchError),
        (future_version, UnsupportedSchemaError),
        (commit_for_another_call, CheckpointError),
    ],
    ids=["run_id_conflict", "future_version", "commit_id_mismatch"],
)
async def test_f07_bad_checkpoint_content_is_refused_before_any_work(
    tmp_path: Path, crashed_store: bytes, edit: Any, error: type[Exception]
) -> None:
    h = Harness(tmp_path)
    data = edit_checkpoint(crashed_store, edit)
    write_store_file(h.path, data)
    with pytest.raises(error):
        await h.restore(FileStore(h.path), tasks=tasks_for("chain"))
    assert h.calls() == []
    assert h.effects() == []
    assert h.path.read_bytes() == data


# -- F10 ----------------------------------------------------------------------------------------


async def test_f10_failing_read_during_restore_raises_and_leaves_the_checkpoint_intact(
    tmp_path: Path, crashed_store: bytes, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    h = Harness(tmp_path)
    write_store_file(h.path, crashed_store)
    store = FailingStore(
        FileStore(h.path), op="get", exc_factory=lambda: ConnectionError("store unavailable")
    )
    with pytest.raises(StoreError):
        await h.restore(store, tasks=tasks_for("chain"))
    assert h.path.read_bytes() == crashed_store  # byte-identical: no fresh run overwrote it
    assert h.calls() == []
    assert h.effects() == []

    result = await h.restore(store, tasks=tasks_for("chain"))  # a retry continues the run
    assert result.attempt == 2
    assert h.effects() == []  # the committed results were replayed
    assert comparable(result_record(result)) == comparable(base.result)


# -- F13 ----------------------------------------------------------------------------------------


async def test_f13_cancellation_during_a_tool_propagates_and_restore_re_runs_it(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    h = Harness(tmp_path)
    store = FileStore(h.path)
    blocked = ToolBehaviour(gate="a_before_effect", entered=asyncio.Event())
    run = asyncio.ensure_future(h.run(store, behaviour=blocked))
    assert blocked.entered is not None
    await asyncio.wait_for(blocked.entered.wait(), timeout=10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run  # propagated, not turned into an error result
    await store.aclose()
    assert h.of(ToolCalled) == []

    snapshot = await load_checkpoint(h.path)  # an aborted run keeps its checkpoint
    assert snapshot is not None
    [pending] = in_flight(snapshot)["pendingToolCalls"]  # type: ignore[index]
    assert "commit" not in pending

    result = await h.restore(FileStore(h.path))
    assert effect_counts(h.effects(), "enter") == {"alpha-t0-A": 2}  # re-run, same id
    assert effect_counts(h.effects()) == {"alpha-t0-A": 1}
    assert result.attempt == 2
    assert comparable(result_record(result)) == comparable(base.result)


# -- F14 ----------------------------------------------------------------------------------------


async def test_f14_checkpoint_without_store_or_run_id_is_refused_before_any_model_call(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, "team")
    team, coordinator = build_team("team", h.ledger, ToolBehaviour())
    orchestrator = OpenMultiAgent()
    with pytest.raises(ConfigurationError, match="run_id"):
        await orchestrator.run_tasks(team, tasks_for("chain"), checkpoint=True)
    with pytest.raises(ConfigurationError, match="run_id"):
        await orchestrator.run_team(team, "goal", checkpoint=True, coordinator=coordinator)
    with pytest.raises(ConfigurationError, match="run_id"):
        await orchestrator.restore(team, tasks_for("chain"), coordinator=coordinator)
    assert h.calls() == []  # not even the planning call


# -- F15 ----------------------------------------------------------------------------------------


async def test_f15_hundred_concurrent_sets_on_one_filestore_key(tmp_path: Path) -> None:
    path = tmp_path / STORE_FILE
    store = FileStore(path)
    await asyncio.gather(*(store.set("k", f"v{i}", {"i": i}) for i in range(100)))
    await store.aclose()
    document = json.loads(path.read_bytes())
    assert [entry["value"] for entry in document["entries"]] == ["v99"]
    fresh = await FileStore(path).get("k")
    assert fresh is not None
    assert fresh.value == "v99"
    assert fresh.metadata == {"i": 99}
    assert [name for name in os.listdir(tmp_path) if ".tmp-" in name] == []

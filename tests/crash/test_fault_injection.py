"""Fault rows F01-F07, F10, F13-F15 (crash-matrix.md 3.4): faults injected without killing.

They run in-process on the same scenario builders as the crash children (``crash_child``), so the
model, the tool ledger and the results are those of the real-process tests.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from crash_child import (
    CHECKPOINT_KEY,
    RUN_ID,
    STORE_FILE,
    ToolBehaviour,
    assistant_saved,
    build_team,
    read_jsonl,
    result_record,
    tasks_for,
)
from crash_harness import GetBaseline, comparable, effect_counts, in_flight, load_checkpoint

from oma_actors import (
    CheckpointError,
    CheckpointOptions,
    CheckpointSaved,
    CheckpointSaveFailed,
    ConfigurationError,
    CorruptStoreError,
    FileStore,
    MemoryEntry,
    OpenMultiAgent,
    ProgressEvent,
    RunIdMismatchError,
    StoreError,
    Task,
    TeamRunResult,
    ToolCalled,
    UnsupportedSchemaError,
)
from oma_actors.testing.faults import FailingStore, UnknownOutcomeStore

pytestmark = pytest.mark.crash


class Recorder:
    """A store wrapper that records every checkpoint write that reached the inner store."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.set_calls = 0
        self.values: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0

    async def get(self, key: str) -> MemoryEntry | None:
        entry: MemoryEntry | None = await self.inner.get(key)
        return entry

    async def set(self, key: str, value: str, metadata: Any = None) -> None:
        self.set_calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await self.pause(json.loads(value))
            await self.inner.set(key, value, metadata)
        finally:
            self.active -= 1
        self.values.append(json.loads(value))

    async def pause(self, snapshot: dict[str, Any]) -> None:
        """Hook for subclasses: delay a write before it reaches the inner store."""

    async def list(self) -> list[MemoryEntry]:
        entries: list[MemoryEntry] = await self.inner.list()
        return entries

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def clear(self) -> None:
        await self.inner.clear()


class Harness:
    """One in-process run of a scenario, with its ledger and events."""

    def __init__(self, tmp_path: Path, scenario: str = "chain", mode: str = "default") -> None:
        self.tmp_path = tmp_path
        self.scenario = scenario
        self.mode = mode
        self.ledger = tmp_path / "ledger"
        self.ledger.mkdir(exist_ok=True)
        self.path = tmp_path / "state" / STORE_FILE
        self.events: list[ProgressEvent] = []

    def team(self, behaviour: ToolBehaviour | None = None) -> Any:
        team, _ = build_team(self.scenario, self.ledger, behaviour or ToolBehaviour(mode=self.mode))
        return team

    def orchestrator(self) -> OpenMultiAgent:
        return OpenMultiAgent(on_progress=self.events.append, max_concurrency=1)

    async def run(
        self, store: Any, *, tasks: list[Task] | None = None, behaviour: ToolBehaviour | None = None
    ) -> TeamRunResult:
        return await self.orchestrator().run_tasks(
            self.team(behaviour),
            tasks if tasks is not None else tasks_for(self.scenario),
            checkpoint=CheckpointOptions(store=store, run_id=RUN_ID),
        )

    async def restore(self, store: Any, *, tasks: list[Task] | None = None) -> TeamRunResult:
        return await self.orchestrator().restore(
            self.team(), tasks, checkpoint=CheckpointOptions(store=store, run_id=RUN_ID)
        )

    def calls(self) -> list[dict[str, Any]]:
        return read_jsonl(self.ledger / "model_calls.jsonl")

    def effects(self) -> list[dict[str, Any]]:
        return read_jsonl(self.ledger / "effects.jsonl")

    def of(self, kind: type[ProgressEvent]) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]


def write_store_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def edit_checkpoint(data: bytes, edit: Any) -> bytes:
    """Apply ``edit(snapshot)`` to the checkpoint inside FileStore bytes."""
    document = json.loads(data)
    for entry in document["entries"]:
        if entry["key"] == CHECKPOINT_KEY:
            snapshot = json.loads(entry["value"])
            edit(snapshot)
            entry["value"] = json.dumps(snapshot)
    return json.dumps(document).encode()


def dispatch_pending(_: str, snapshot: Any) -> bool:
    """The strict dispatch save of an unsafe call: marked dispatched, not committed."""
    entry = in_flight(snapshot) if isinstance(snapshot, dict) else None
    if entry is None or entry["phase"] != "executing_tools":
        return False
    return any(c.get("dispatched") and "commit" not in c for c in entry["pendingToolCalls"])


# -- F01 / F02 ----------------------------------------------------------------------------------


async def test_f01_one_failing_save_is_reported_once_and_the_next_save_is_complete(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    h = Harness(tmp_path)
    recorder = Recorder(FileStore(h.path))
    # The second checkpoint write is the assistant tool turn (after the admission save).
    store = FailingStore(recorder, nth=2, times=1)
    result = await h.run(store)

    assert result.success
    [failure] = h.of(CheckpointSaveFailed)
    assert "injected" in failure.error
    saved = [event.revision for event in h.of(CheckpointSaved)]
    assert saved == list(range(1, len(saved) + 1))  # the revision grows only on success
    assert [value["revision"] for value in recorder.values] == saved
    # The next boundary saved the full current state, rebuilt from memory: the lost assistant
    # turn is in it.
    entry = in_flight(recorder.values[1])
    assert entry is not None
    assert entry["turns"] == 1
    assert any(
        block["type"] == "tool_use"
        for message in entry["conversationMessages"]
        if message["role"] == "assistant"
        for block in message["content"]
    )
    assert comparable(result_record(result)) == comparable(base.result)


async def test_f02_every_save_fails_and_a_later_restore_starts_fresh(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    h = Harness(tmp_path)
    store = FailingStore(FileStore(h.path), times=None)
    result = await h.run(store)
    assert result.success
    assert len(h.of(CheckpointSaveFailed)) == store.fired == store.matched > 1  # one per boundary
    assert h.of(CheckpointSaved) == []
    assert not h.path.exists()

    calls_before = len(h.calls())
    again = await h.restore(FileStore(h.path), tasks=tasks_for("chain"))
    assert again.attempt == 1  # nothing to continue: a fresh run
    assert len(h.calls()) == 2 * calls_before == 2 * len(base.calls)
    assert comparable(result_record(again)) == comparable(base.result)


# -- F03 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("landed", [True, False])
async def test_f03_unknown_outcome_of_a_strict_dispatch_save_fails_closed(
    tmp_path: Path, landed: bool
) -> None:
    h = Harness(tmp_path, mode="unsafe")
    recorder = Recorder(FileStore(h.path))
    store = UnknownOutcomeStore(recorder, landed=landed, predicate=dispatch_pending)
    result = await h.run(store)

    assert store.fired == 1
    assert result.success  # the run goes on; only the unsafe call is refused
    assert h.effects() == []  # the tool was not run at all
    [turn1] = [c for c in h.calls() if c["task"] == "alpha" and c["turn"] == 1]
    [[call_id, text, is_error]] = turn1["seen"]
    assert (call_id, is_error) == ("alpha-t0-A", True)
    assert text.startswith("TOOL_DISPATCH_NOT_DURABLE")
    [failure] = h.of(CheckpointSaveFailed)
    assert "TimeoutError" in failure.error
    # An unknown outcome is not counted as a save; stored revisions never go backwards.
    stored = [value["revision"] for value in recorder.values]
    assert stored == sorted(stored)
    assert [e.revision for e in h.of(CheckpointSaved)] == sorted(set(stored))


@pytest.mark.parametrize("landed", [True, False])
async def test_f03_unknown_outcome_of_a_best_effort_save_continues(
    tmp_path: Path, baseline: GetBaseline, landed: bool
) -> None:
    base = baseline("chain")
    h = Harness(tmp_path)
    store = UnknownOutcomeStore(FileStore(h.path), landed=landed, predicate=assistant_saved)
    result = await h.run(store)
    assert store.fired == 1
    assert len(h.of(CheckpointSaveFailed)) == 1
    assert effect_counts(h.effects()) == {"alpha-t0-A": 1}
    assert comparable(result_record(result)) == comparable(base.result)


# -- F04 ----------------------------------------------------------------------------------------


def cyclic() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize("bad", [object, cyclic], ids=["object", "cyclic"])
async def test_f04_unserializable_snapshot_is_not_saved_and_never_reaches_the_store(
    tmp_path: Path, bad: Any
) -> None:
    h = Harness(tmp_path)
    recorder = Recorder(FileStore(h.path))
    tasks = [
        Task(
            t.title,
            t.description,
            id=t.id,
            assignee=t.assignee,
            depends_on=t.depends_on,
            metadata={"bad": bad()},
        )
        if t.id == "alpha"
        else t
        for t in tasks_for("chain")
    ]
    result = await h.run(recorder, tasks=tasks)
    assert result.success  # best-effort saves: the run finishes
    failures = h.of(CheckpointSaveFailed)
    assert failures
    assert all("cannot be serialized" in failure.error for failure in failures)
    assert recorder.set_calls == 0  # NotSaved: rejected before any write
    assert h.of(CheckpointSaved) == []
    assert not h.path.exists()


# -- F05 ----------------------------------------------------------------------------------------


class DelayFirstCommit(Recorder):
    """Delays the first write that holds exactly one commit, so a sibling's could overtake it."""

    delayed = False

    async def pause(self, snapshot: dict[str, Any]) -> None:
        entry = in_flight(snapshot)
        if self.delayed or entry is None or entry["phase"] != "executing_tools":
            return
        if sum("commit" in c for c in entry["pendingToolCalls"]) == 1:
            self.delayed = True
            await asyncio.sleep(0.2)


async def test_f05_parallel_commits_through_a_slow_store_are_not_lost(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("parallel")
    h = Harness(tmp_path, "parallel")
    store = DelayFirstCommit(FileStore(h.path))
    result = await h.run(store)
    assert store.delayed
    assert store.max_active == 1  # one writer: snapshots are built and written in order
    revisions = [value["revision"] for value in store.values]
    assert revisions == list(range(1, len(revisions) + 1))
    tool_states = [in_flight(v) for v in store.values]
    last = [e for e in tool_states if e is not None and e["phase"] == "executing_tools"][-1]
    assert [("commit" in c) for c in last["pendingToolCalls"]] == [True, True]
    assert (await load_checkpoint(h.path))["revision"] == revisions[-1]  # type: ignore[index]
    assert comparable(result_record(result)) == comparable(base.result)


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

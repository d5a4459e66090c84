"""``RunWriter``: strictness by boundary, probe reports, committed calls, ordered writes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
from checkpoint_support import make_snapshot

from oma_actors.checkpoint import Checkpoint, NotSaved, RunWriter, Saved, Unknown, run_writer
from oma_actors.checkpoint.boundaries import (
    BOUNDARIES,
    STRICT_BOUNDARIES,
    BoundaryPoint,
    probing,
)
from oma_actors.checkpoint.run_writer import Fenced
from oma_actors.errors import LeaseError
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed, ProgressEvent
from oma_actors.stores.memory import InMemoryStore


class FlakyStore(InMemoryStore):
    """Fails every write whose snapshot goal is in ``fail_goals``; records what landed."""

    def __init__(self, fail_goals: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.fail_goals = fail_goals
        self.landed: list[tuple[int, str | None]] = []

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        raw = json.loads(value)
        await asyncio.sleep(0)  # a real store yields: ordering must not rely on it not doing so
        if raw.get("goal") in self.fail_goals:
            raise OSError(28, "No space left on device")
        await super().set(key, value, metadata)
        self.landed.append((raw["revision"], raw.get("goal")))


def writer_on(store: InMemoryStore, events: list[ProgressEvent], revision: int = 0) -> RunWriter:
    return RunWriter(Checkpoint(store, run_id="run-test"), emit=events.append, revision=revision)


@pytest.mark.parametrize("boundary", sorted(BOUNDARIES))
async def test_strictness_is_decided_by_the_boundary_name(boundary: Any) -> None:
    events: list[ProgressEvent] = []
    writer = writer_on(FlakyStore(frozenset({"doomed"})), events)
    outcome = await writer.save(make_snapshot(goal="doomed"), boundary=boundary)
    assert isinstance(outcome, Unknown)
    assert not outcome.durable
    assert events == [
        CheckpointSaveFailed(
            run_id="run-test",
            error=outcome.error,
            boundary=boundary,
            strict=boundary in STRICT_BOUNDARIES,
        )
    ]


def test_every_suspension_and_dispatch_boundary_is_strict() -> None:
    # D1/D2/AP-19: an unsafe tool's dispatch record and every suspension or rejection must be
    # durable before the run goes on; a best-effort completion is not strict.
    assert {
        "tool_dispatch",
        "suspended",
        "approval_requested",
        "plan_suspended",
        "approval_rejected",
    } <= STRICT_BOUNDARIES
    assert "task_completed" not in STRICT_BOUNDARIES
    assert "tool_commit" not in STRICT_BOUNDARIES


async def test_the_probe_sees_each_boundary_before_and_after_with_its_durability() -> None:
    seen: list[BoundaryPoint] = []
    events: list[ProgressEvent] = []
    writer = writer_on(FlakyStore(frozenset({"two"})), events, revision=4)
    with probing(seen.append):
        await writer.save(make_snapshot(goal="one"), boundary="tool_commit", task_id="t1")
        await writer.save(make_snapshot(goal="two"), boundary="task_completed", task_id="t1")
    await writer.save(make_snapshot(goal="three"), boundary="admission")  # no probe any more
    assert [(p.boundary, p.phase, p.task_id, p.revision, p.durable) for p in seen] == [
        ("tool_commit", "before", "t1", 5, None),
        ("tool_commit", "after", "t1", 5, True),
        ("task_completed", "before", "t1", 6, None),
        ("task_completed", "after", "t1", 6, False),
    ]
    assert {p.run_id for p in seen} == {"run-test"}


async def test_without_a_probe_a_save_builds_no_boundary_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Production installs no probe: the two points of every save are not built (issue 19).
    def unexpected(**fields: object) -> BoundaryPoint:
        raise AssertionError(f"a point was built with no probe installed: {fields}")

    monkeypatch.setattr(run_writer, "BoundaryPoint", unexpected)
    writer = writer_on(FlakyStore(), [])
    outcome = await writer.save(make_snapshot(goal="one"), boundary="tool_commit")
    assert isinstance(outcome, Saved)


async def test_a_probe_runs_before_the_store_is_touched() -> None:
    store = FlakyStore()

    def stop_before(point: BoundaryPoint) -> None:
        if point.phase == "before":
            raise RuntimeError("crash here")

    writer = writer_on(store, [])
    with probing(stop_before), pytest.raises(RuntimeError, match="crash here"):
        await writer.save(make_snapshot(goal="one"), boundary="tool_dispatch")
    assert store.landed == []
    assert writer.revision == 0


async def test_saved_names_the_boundary_task_and_committed_calls() -> None:
    events: list[ProgressEvent] = []
    writer = writer_on(FlakyStore(), events)
    outcome = await writer.save(
        make_snapshot(), boundary="tool_commit", task_id="t1", committed=["call-1", "call-2"]
    )
    assert outcome == Saved(1)
    assert outcome.durable
    assert events == [
        CheckpointSaved(
            run_id="run-test",
            revision=1,
            boundary="tool_commit",
            task_id="t1",
            committed=("call-1", "call-2"),
        )
    ]


async def test_concurrent_saves_land_in_call_order_with_consecutive_revisions() -> None:
    store = FlakyStore()
    writer = writer_on(store, [])
    outcomes = await asyncio.gather(
        *(writer.save(make_snapshot(goal=f"g{i}"), boundary="tool_commit") for i in range(5))
    )
    assert outcomes == [Saved(n) for n in range(1, 6)]
    assert store.landed == [(n + 1, f"g{n}") for n in range(5)]


async def test_a_failed_save_keeps_the_revision_and_the_stored_snapshot() -> None:
    store = FlakyStore(frozenset({"bad"}))
    writer = writer_on(store, [])
    assert await writer.save(make_snapshot(goal="good"), boundary="admission") == Saved(1)
    failed = await writer.save(make_snapshot(goal="bad"), boundary="approval_rejected")
    assert isinstance(failed, Unknown)
    assert writer.revision == 1
    loaded = await writer.checkpoint.load_latest()
    assert loaded is not None
    assert (loaded.revision, loaded.goal) == (1, "good")


async def test_an_unencodable_snapshot_is_not_saved() -> None:
    store = FlakyStore()
    outcome = await writer_on(store, []).save(
        make_snapshot(metadata={"handle": object()}), boundary="synthesis"
    )
    assert isinstance(outcome, NotSaved)
    assert store.landed == []


class RefusingFence:
    """A lease whose fenced writes are refused with ``code`` (the run record's answer)."""

    fence_store = None

    def __init__(self, code: str) -> None:
        self.code = code

    async def fenced(self, apply: Any, *, checkpoint_ref: Any = None) -> bool:
        raise LeaseError(self.code, "refused")

    async def record_checkpoint(self, ref: Mapping[str, object]) -> Any:
        raise LeaseError(self.code, "refused")


@pytest.mark.parametrize(
    ("code", "outcome"), [("RUN_LEASE_LOST", Fenced), ("RUN_CONFLICT", NotSaved)]
)
async def test_only_a_lost_lease_fences_the_writer_out(code: str, outcome: type) -> None:
    # Another owner holds the run only when the lease is lost; any other refusal of the
    # record's update is a save that did not happen (the run goes on and may save again).
    store = FlakyStore()
    writer = RunWriter(
        Checkpoint(store, run_id="run-test"), emit=[].append, fence=RefusingFence(code)
    )
    result = await writer.save(make_snapshot(goal="g"), boundary="admission")
    assert type(result) is outcome
    assert store.landed == []

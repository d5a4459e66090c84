"""``CheckpointActor`` over a ``RunWriter``: ordered revisions and save outcomes (decision D2)."""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from checkpoint_support import make_snapshot

from oma_actors.actors import ActorSystem
from oma_actors.checkpoint import (
    Checkpoint,
    CheckpointActor,
    NotSaved,
    RunWriter,
    Save,
    Saved,
    Unknown,
)
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed, ProgressEvent
from oma_actors.stores.base import MemoryEntry
from oma_actors.stores.memory import InMemoryStore

if TYPE_CHECKING:
    from oma_actors.checkpoint.boundaries import Boundary
    from oma_actors.domain.snapshot import CheckpointSnapshot


def save(snapshot: CheckpointSnapshot, boundary: Boundary) -> Save:
    """The checkpoint actor's message saving ``snapshot``, built already, as ``boundary``."""
    return Save(run=RunAtBoundary.of(snapshot), boundary=boundary)


class RecordingStore(InMemoryStore):
    """An in-memory store that records every write and can fail chosen ones."""

    def __init__(self, *, fail_on: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.fail_on = fail_on
        self.calls = 0
        self.written: builtins.list[tuple[int, str | None]] = []

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        self.calls += 1
        if self.calls in self.fail_on:
            raise OSError(28, "No space left on device")
        await asyncio.sleep(0)  # a real store yields; ordering must not depend on it
        raw = json.loads(value)
        self.written.append((raw["revision"], raw.get("goal")))
        await super().set(key, value, metadata)


async def _only_entry(store: InMemoryStore) -> MemoryEntry:
    (entry,) = await store.list()
    return entry


async def test_revisions_count_up_in_order() -> None:
    store = RecordingStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    events: list[ProgressEvent] = []
    actor = CheckpointActor(RunWriter(checkpoint, emit=events.append))
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="checkpoint")
        outcomes = await asyncio.gather(
            *(
                ref.ask(save(make_snapshot(goal=f"g{i}", revision=99), boundary="tool_commit"))
                for i in (1, 2, 3)
            )
        )
    assert outcomes == [Saved(1), Saved(2), Saved(3)]
    assert store.written == [(1, "g1"), (2, "g2"), (3, "g3")]  # incoming revision is restamped
    assert events == [
        CheckpointSaved(run_id="run-test", revision=n, boundary="tool_commit") for n in (1, 2, 3)
    ]
    assert actor.revision == 3
    loaded = await checkpoint.load_latest()
    assert loaded is not None
    assert (loaded.revision, loaded.goal) == (3, "g3")
    assert (await _only_entry(store)).metadata == {
        "namespace": "checkpoint",
        "version": 4,
        "runId": "run-test",
        "createdAt": loaded.created_at,
    }


async def test_revision_continues_from_a_restored_snapshot() -> None:
    checkpoint = Checkpoint(InMemoryStore(), run_id="run-test")
    async with ActorSystem() as system:
        ref = system.spawn(CheckpointActor(RunWriter(checkpoint, emit=lambda _: None, revision=12)))
        assert await ref.ask(save(make_snapshot(), boundary="admission")) == Saved(13)
    loaded = await checkpoint.load_latest()
    assert loaded is not None
    assert loaded.revision == 13


async def test_a_failing_store_is_unknown_and_keeps_the_revision() -> None:
    store = RecordingStore(fail_on=frozenset({2}))
    checkpoint = Checkpoint(store, run_id="run-test")
    events: list[ProgressEvent] = []
    actor = CheckpointActor(RunWriter(checkpoint, emit=events.append))
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="checkpoint")
        first = await ref.ask(save(make_snapshot(goal="one"), boundary="admission"))
        failed = await ref.ask(save(make_snapshot(goal="two"), boundary="tool_dispatch"))
        assert actor.revision == 1
        third = await ref.ask(save(make_snapshot(goal="three"), boundary="task_completed"))
        assert ref.is_alive  # a store failure is an outcome, not a crash
    assert first == Saved(1)
    assert isinstance(failed, Unknown)
    assert "OSError" in failed.error
    assert "No space left on device" in failed.error
    assert third == Saved(2)
    assert events == [
        CheckpointSaved(run_id="run-test", revision=1, boundary="admission"),
        CheckpointSaveFailed(
            run_id="run-test", error=failed.error, boundary="tool_dispatch", strict=True
        ),
        CheckpointSaved(run_id="run-test", revision=2, boundary="task_completed"),
    ]
    assert store.written == [(1, "one"), (2, "three")]


async def test_an_unencodable_snapshot_is_not_saved_and_never_reaches_the_store() -> None:
    store = RecordingStore()
    checkpoint = Checkpoint(store, run_id="run-test")
    events: list[ProgressEvent] = []
    actor = CheckpointActor(RunWriter(checkpoint, emit=events.append))
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="checkpoint")
        outcome = await ref.ask(
            save(make_snapshot(metadata={"handle": object()}), boundary="admission")
        )
        assert store.calls == 0
        assert actor.revision == 0
        after = await ref.ask(save(make_snapshot(), boundary="admission"))
    assert isinstance(outcome, NotSaved)
    assert "snapshot cannot be serialized" in outcome.error
    assert events[0] == CheckpointSaveFailed(
        run_id="run-test", error=outcome.error, boundary="admission"
    )
    assert after == Saved(1)
    assert store.calls == 1

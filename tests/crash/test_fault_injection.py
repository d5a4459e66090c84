"""Fault rows F01-F05 (crash-matrix.md 3.4): checkpoint saves that fail, without killing.

A save that raises, whose outcome is unknown, that cannot be serialized, or that a slow store
could reorder: the run goes on (or fails closed at a strict boundary), the failure is reported
once, and what is stored never goes backwards. These rows are about what a *store* does to a
write, so the faults are store wrappers; which write they hit is chosen by boundary
(``AtBoundary``) or by count, and the snapshots are parsed only to check what landed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from crash_checks import GetBaseline, comparable, effect_counts, in_flight
from crash_harness import load_checkpoint
from crash_ledger import result_record
from crash_scenarios import CHECKPOINT_KEY, tasks_for
from fault_harness import AtBoundary, Harness, Recorder

from oma_actors import Task, TaskGraphError
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed
from oma_actors.stores import FileStore
from oma_actors.testing.faults import FailingStore, UnknownOutcomeStore

# -- F01 / F02 ----------------------------------------------------------------------------------


async def test_f01_one_failing_save_is_reported_once_and_the_next_save_is_complete(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    h = Harness(tmp_path)
    recorder = Recorder(FileStore(h.path))
    # The save of the assistant tool turn fails (the second write, after the admission save).
    turn = AtBoundary("assistant_tool_turn", "alpha")
    store = FailingStore(recorder, predicate=turn.predicate)
    with turn.watching():
        result = await h.run(store)

    assert (turn.hits, store.fired) == (1, 1)

    assert result.success
    [failure] = h.of(CheckpointSaveFailed)
    assert "injected" in failure.error
    assert failure.boundary == "assistant_tool_turn"
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
    dispatch = AtBoundary("tool_dispatch", "alpha")  # the unsafe call's strict dispatch save
    store = UnknownOutcomeStore(recorder, landed=landed, predicate=dispatch.predicate)
    with dispatch.watching():
        result = await h.run(store)

    assert (dispatch.hits, store.fired) == (1, 1)
    assert result.success  # the run goes on; only the unsafe call is refused
    assert h.effects() == []  # the tool was not run at all
    [turn1] = [c for c in h.calls() if c["task"] == "alpha" and c["turn"] == 1]
    [[call_id, text, is_error]] = turn1["seen"]
    assert (call_id, is_error) == ("alpha-t0-A", True)
    assert text.startswith("TOOL_DISPATCH_NOT_DURABLE")
    [failure] = h.of(CheckpointSaveFailed)
    assert "TimeoutError" in failure.error
    assert (failure.boundary, failure.strict) == ("tool_dispatch", True)
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
    turn = AtBoundary("assistant_tool_turn", "alpha")
    store = UnknownOutcomeStore(FileStore(h.path), landed=landed, predicate=turn.predicate)
    with turn.watching():
        result = await h.run(store)
    assert (turn.hits, store.fired) == (1, 1)
    assert len(h.of(CheckpointSaveFailed)) == 1
    assert effect_counts(h.effects()) == {"alpha-t0-A": 1}
    assert comparable(result_record(result)) == comparable(base.result)


# -- F04 ----------------------------------------------------------------------------------------


def cyclic() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


def test_f04_unserializable_metadata_is_refused_before_the_run() -> None:
    for bad in (object(), cyclic()):
        with pytest.raises(TaskGraphError):
            Task("t", "x", id="alpha", metadata={"bad": bad})


async def test_f04_unserializable_snapshot_is_not_saved_and_never_reaches_the_store(
    tmp_path: Path,
) -> None:
    bad = object
    h = Harness(tmp_path)
    recorder = Recorder(FileStore(h.path))
    tasks = [
        Task(t.title, t.description, id=t.id, assignee=t.assignee, depends_on=t.depends_on)
        if t.id == "alpha"
        else t
        for t in tasks_for("chain")
    ]
    # Task refuses such metadata up front (TaskGraphError, issue 22); planted past that check,
    # as a bug elsewhere could, the codec must still refuse the snapshot before any write.
    assert tasks[0].id == "alpha"
    object.__setattr__(tasks[0], "metadata", {"bad": bad()})
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
    """Delays the first commit's write (chosen by boundary), so a sibling's could overtake it."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.first_commit = AtBoundary("tool_commit", "alpha")
        self.delayed = False

    async def pause(self, snapshot: dict[str, Any]) -> None:
        if not self.delayed and self.first_commit.predicate(CHECKPOINT_KEY, snapshot):
            self.delayed = True
            await asyncio.sleep(0.2)


async def test_f05_parallel_commits_through_a_slow_store_are_not_lost(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("parallel")
    h = Harness(tmp_path, "parallel")
    store = DelayFirstCommit(FileStore(h.path))
    with store.first_commit.watching():
        result = await h.run(store)
    assert store.delayed
    assert sum("commit" in c for c in in_flight(store.values[2])["pendingToolCalls"]) == 1  # type: ignore[index]
    assert store.max_active == 1  # one writer: snapshots are built and written in order
    revisions = [value["revision"] for value in store.values]
    assert revisions == list(range(1, len(revisions) + 1))
    tool_states = [in_flight(v) for v in store.values]
    last = [e for e in tool_states if e is not None and e["phase"] == "executing_tools"][-1]
    assert [("commit" in c) for c in last["pendingToolCalls"]] == [True, True]
    assert (await load_checkpoint(h.path))["revision"] == revisions[-1]  # type: ignore[index]
    assert comparable(result_record(result)) == comparable(base.result)

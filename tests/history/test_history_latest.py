"""``state_at`` at a late point folds from the newest stored state at or below it.

An interrupted run's latest snapshot (a compaction the journal folds to exactly, no anchor) is
nearer to a late point than the anchor below it: the fold starts there and reads fewer events,
and its state is the one the fold from the anchor gives. A latest snapshot of another line of
attempts is never the base.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from history_support import Workspace, comparable
from test_history import fold_bases, outgrown_run

from oma_actors.checkpoint import Checkpoint, encode, run_history, state_at
from oma_actors.checkpoint.anchors import SUMMARY
from oma_actors.checkpoint.history import load_timeline
from oma_actors.domain.snapshot import RunIdentity
from oma_actors.keyspace import history_prefix


def folded_counts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many events each fold of ``state_at`` was given."""
    from oma_actors.checkpoint import history

    counts: list[int] = []
    real = history.fold_tail

    def spy(snapshot: Any, events: Any, *args: Any, **kwargs: Any) -> Any:
        counts.append(len(events))
        return real(snapshot, events, *args, **kwargs)

    monkeypatch.setattr(history, "fold_tail", spy)
    return counts


async def test_a_late_point_folds_from_the_latest_snapshot_and_equals_the_anchors_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch)
    await Checkpoint(space.store(), run_id="r1").write_encoded(
        encode(saved[mark][1]), saved[mark][1]
    )
    counts = folded_counts(monkeypatch)
    for seq in above:
        counts.clear()
        state = await state_at(space.store(), "r1", seq)
        (latest_events,) = counts
        # The old way: from the anchor below the point alone.
        timeline = await load_timeline(space.store(), "r1", at=seq, use_latest=False)
        old = timeline.fold_at(seq)[0]
        (anchor_events,) = counts[1:]
        assert comparable(state) == comparable(old) == comparable(saved[seq][1]), seq
        assert state.journal_watermark_seq == old.journal_watermark_seq == seq
        assert latest_events < anchor_events, (seq, latest_events, anchor_events)


async def test_a_latest_snapshot_of_a_newer_attempt_than_the_point_is_not_folded_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The points above the snapshot were reached by attempt 1; a snapshot claiming attempt 2
    # is of no line of attempts that reached them: the anchor below answers.
    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch)
    snapshot = saved[mark][1]
    identity = snapshot.identity or RunIdentity(
        run_id="r1", attempt=1, trace_id="", root_span_id=""
    )
    newer = replace(snapshot, attempt=2, identity=replace(identity, attempt=2))
    await Checkpoint(space.store(), run_id="r1").write_encoded(encode(newer), newer)
    bases = fold_bases(monkeypatch)
    for seq in above:
        state = await state_at(space.store(), "r1", seq)
        assert comparable(state) == comparable(saved[seq][1]), seq
    assert len(bases) == len(above)
    assert all(base is not None and base < mark for base in bases), bases


async def test_a_latest_snapshot_older_than_the_anchor_below_it_is_not_folded_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The anchor below the point says attempt 2 wrote it; a later snapshot of attempt 1 was
    # written by a superseded attempt and is not the state that anchor's line reached.
    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch)
    store = space.store()
    await Checkpoint(store, run_id="r1").write_encoded(encode(saved[mark][1]), saved[mark][1])
    floor = max(
        (e for e in await store.list() if e.key.startswith(history_prefix("r1"))),
        key=lambda e: int(e.key.rsplit("/", 1)[1]) if int(e.key.rsplit("/", 1)[1]) < mark else -1,
    )
    metadata = dict(floor.metadata or {})
    metadata[SUMMARY] = {**metadata[SUMMARY], "attempt": 2}
    await store.set(floor.key, floor.value, metadata)
    bases = fold_bases(monkeypatch)
    for seq in above:
        await state_at(space.store(), "r1", seq)
    assert len(bases) == len(above)
    assert all(base is not None and base < mark for base in bases), bases


@pytest.mark.parametrize("name", ["parallel_unsafe", "two_tasks_one_journal"])
async def test_a_fold_to_one_point_labels_it_as_the_listing_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # A fold to one point reads only what that point's label needs of the events before it;
    # the point is the listing's, label, turn and tool name included.
    from test_history import WORKLOADS, capture_run

    space = Workspace(tmp_path)
    await capture_run(space, WORKLOADS[name], monkeypatch)
    points = await run_history(space.store(), "r1")
    assert any(p.boundary == "tool_commit" for p in points)
    for point in points:
        timeline = await load_timeline(space.store(), "r1", at=point.seq, use_latest=False)
        assert timeline.point(point.seq) == point


async def test_state_at_folds_without_listing_started_calls_and_fork_run_lists_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only a fork marks the calls started at its point (D1); the state alone does not need
    # them, and the fold is the same without them.
    from oma_actors.journal import fold

    space, _saved, _mark, above = await outgrown_run(tmp_path, monkeypatch)
    listed: list[int] = []
    real = fold._started_calls

    def spy(events: Any) -> Any:
        listed.append(len(events))
        return real(events)

    monkeypatch.setattr(fold, "_started_calls", spy)
    state = await state_at(space.store(), "r1", above[-1])
    assert listed == []
    timeline = await load_timeline(space.store(), "r1", at=above[-1])
    with_calls, started = timeline.fold_at(above[-1])
    assert listed
    assert started
    assert with_calls == state


async def test_a_listings_points_are_whole_history_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A point's slots are set one by one (``history._event_point``): each is set, and the
    # point equals the one ``HistoryPoint(...)`` builds of the same values.
    from dataclasses import fields

    from test_history import WORKLOADS, capture_run

    from oma_actors.checkpoint.history import HistoryPoint

    space = Workspace(tmp_path)
    await capture_run(space, WORKLOADS["two_tasks_one_journal"], monkeypatch)
    points = await run_history(space.store(), "r1")
    assert any(p.boundary == "tool_commit" for p in points)
    for point in points:
        again = HistoryPoint(**{f.name: getattr(point, f.name) for f in fields(HistoryPoint)})
        assert again == point
        assert hash(again) == hash(point)

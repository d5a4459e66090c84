"""A fresh run given the id of a finished run replaces it whole, its history included (D17).

``run_tasks`` on a key holding a finished run simply replaces it (D12: a nightly job reusing its
run id). The replaced run's history anchors must go with its snapshot: otherwise
``run_history`` listed the old run's points as the new run's, ``state_at`` and ``fork_run``
folded the old run's state under the new run's id, and every replaced run's anchors stayed in
the store (in a FileStore's one document, parsed by every restore). The old run's events stay
in a journal file other runs share; the timeline reads the new run's alone (``current_life``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from history_support import (
    Effects,
    MemoryWorkspace,
    Workspace,
    make_team,
    run_journal_first,
    tasks,
)

from oma_actors import CheckpointOptions, OpenMultiAgent
from oma_actors.checkpoint import Checkpoint, history_keys, run_history, state_at
from oma_actors.errors import NoHistoryError, NotAHistoryPointError
from oma_actors.keyspace import history_key, history_prefix, is_history_key_of
from oma_actors.timeline import build_timeline


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_a_fresh_run_on_a_finished_run_s_id_has_only_its_own_history(
    tmp_path: Path, kind: str
) -> None:
    space = Workspace(tmp_path) if kind == "file" else MemoryWorkspace(tmp_path)
    first = await run_journal_first(space, make_team(3, 1, "idempotent", Effects()), 1)
    assert first.success
    old = await run_history(space.store(), "r1", journal=space.journal())
    again = await run_journal_first(space, make_team(1, 1, "idempotent", Effects()), 1)
    assert again.success

    points = await run_history(space.store(), "r1", journal=space.journal())
    started = points[0].seq
    assert points[0].boundary == "admission"
    assert started > old[-1].seq  # the new run's admission, above everything of the old run
    assert [p.boundary for p in points].count("tool_commit") == 1  # one tool turn, not four
    anchors = await space.store().list(prefix=history_prefix("r1"))
    assert all(int(entry.key.rsplit("/", 1)[1]) >= started for entry in anchors)
    with pytest.raises(NotAHistoryPointError):
        await state_at(space.store(), "r1", old[3].seq, journal=space.journal())

    # The journal file still holds the old run's lines; the timeline shows this run's turns.
    snapshot = await Checkpoint(space.store(), run_id="r1").load_latest()
    assert snapshot is not None
    journal = space.journal()
    try:
        events = await journal.read_from(0)
    finally:
        await journal.close()
    assert min(e.seq for e in events) < started
    [lane] = build_timeline(snapshot, events).lanes
    assert [[c.call_id for c in turn.calls] for turn in lane.turns] == [["c0-0"], []]


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_a_fresh_run_without_a_journal_leaves_none_of_the_old_run_s_history(
    tmp_path: Path, kind: str
) -> None:
    # Saved in OMA's mode, the new run writes its snapshots on the path that keeps no anchor
    # in the snapshot's own batch: the old run's anchors go there too, and its latest snapshot
    # (its newest anchor, still uncopied) is overwritten, not kept as one.
    space = Workspace(tmp_path) if kind == "file" else MemoryWorkspace(tmp_path)
    assert (await run_journal_first(space, make_team(3, 1, "idempotent", Effects()), 1)).success
    assert await space.store().list(prefix=history_prefix("r1"))
    again = await OpenMultiAgent().run_tasks(
        make_team(1, 1, "idempotent", Effects()), tasks(1),
        checkpoint=CheckpointOptions(store=space.store(), run_id="r1"),
    )  # fmt: skip
    assert again.success
    assert await space.store().list(prefix=history_prefix("r1")) == []
    with pytest.raises(NoHistoryError):
        await run_history(space.store(), "r1", journal=space.journal())


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_replacing_a_run_keeps_the_history_of_a_run_whose_id_continues_its_own(
    tmp_path: Path, kind: str
) -> None:
    # A run id may hold "/": the anchors of "r1/child" lie under the prefix of "r1" too.
    space = Workspace(tmp_path) if kind == "file" else MemoryWorkspace(tmp_path)
    team = make_team(3, 1, "idempotent", Effects())
    assert (await run_journal_first(space, team, 1, run_id="r1/child")).success
    before = await run_history(space.store(), "r1/child", journal=space.journal())
    kept = [e.key for e in await space.store().list(prefix=history_prefix("r1/child"))]
    assert len(before) > 3
    assert kept
    with pytest.raises(NoHistoryError):  # "r1" has none: "r1/child"'s points are not its own
        await run_history(space.store(), "r1", journal=space.journal())

    for _ in range(2):  # the second run of "r1" replaces the first (and forgets its anchors)
        assert (await run_journal_first(space, make_team(1, 1, "idempotent", Effects()), 1)).success

    after = await run_history(space.store(), "r1/child", journal=space.journal())
    assert [p.seq for p in after] == [p.seq for p in before]
    assert [e.key for e in await space.store().list(prefix=history_prefix("r1/child"))] == kept
    assert await history_keys(space.store(), "r1") != []  # "r1" has its own
    assert not set(await history_keys(space.store(), "r1")) & set(kept)
    await state_at(space.store(), "r1/child", before[1].seq, journal=space.journal())


def test_a_history_key_is_its_run_s_only_when_the_rest_is_its_watermark() -> None:
    assert is_history_key_of("a", history_key("a", 2))
    assert not is_history_key_of("a", history_key("a/b", 2))
    assert not is_history_key_of("a", history_key("a/000000000002", 2))
    assert is_history_key_of("a/000000000002", history_key("a/000000000002", 2))
    assert not is_history_key_of("a", history_prefix("a") + "2")
    assert not is_history_key_of("a", history_prefix("a") + "00000000000x")
    assert not is_history_key_of("ab", history_key("a", 2))

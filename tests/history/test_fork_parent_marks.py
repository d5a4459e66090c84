"""A fork keeps every dispatched mark its parent's run made (decisions D17 and D1).

``fork_run`` lists in ``FORK_MARKED`` only the calls it marked itself, for want of a team; the
child's restore clears those whose tool its team calls safe. A call the parent's run had already
marked dispatched (its own dispatch record: the call may have had its effect) is not the fork's
to undo: the child never runs it again, whatever its team now says of the tool, as a restore of
the parent never would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from history_support import MemoryWorkspace, restore_run, run_journal_first
from two_calls import of, two_tools

from oma_actors.checkpoint import Checkpoint, fork_run, journal_path, run_history, state_at
from oma_actors.checkpoint.fork import FORK_MARKED
from oma_actors.events import ProgressEvent, ToolOutcomeUnknown

Effects = list[tuple[str | None, str]]


async def test_a_call_the_parents_run_marked_is_never_run_again_in_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards ``fork._mark_started`` (a call the state already holds dispatched is never listed
    in ``FORK_MARKED``) and ``clear_fork_marks`` (only a listed call's mark is cleared).

    Every journal boundary compacts here, so ``risky``'s dispatch is an anchor whose state holds
    the run's own mark. The fork at ``safe``'s ``tool/call`` lists ``s0`` alone; the child is
    restored by a team that no longer calls ``risky`` unsafe: ``s0`` runs again (D1), ``u0``
    never does (``TOOL_OUTCOME_UNKNOWN``). Listing ``u0`` too, or clearing an unlisted mark,
    would run the parent's recorded effect a second time.
    """
    monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)
    monkeypatch.setattr(journal_path, "TAIL_RATIO", 0)
    space = MemoryWorkspace(tmp_path)
    effects: Effects = []
    assert (await run_journal_first(space, two_tools(effects), 1)).success
    assert sorted(of(effects, "r1")) == ["s0", "u0"]
    points = await run_history(space.store(), "r1")
    # The first dispatch is risky's (its ``tool/call`` precedes its run): an anchor here.
    dispatch = next(p for p in points if p.boundary == "tool_dispatch")
    assert "(snapshot)" in dispatch.label
    at = next(p for p in points if p.label == "t0 turn 1: tool safe dispatched")
    assert dispatch.seq < at.seq
    anchored = await state_at(space.store(), "r1", dispatch.seq)
    [entry] = anchored.in_flight
    assert {i.call.id: i.dispatched for i in entry.state.pending} == {"s0": False, "u0": True}

    await fork_run(space.store(), "r1", at_seq=at.seq, new_run_id="child")
    child = await Checkpoint(space.store(), run_id="child").load_latest()
    assert child is not None
    [entry] = child.in_flight
    assert {i.call.id: i.dispatched for i in entry.state.pending} == {"s0": True, "u0": True}
    assert [item["callId"] for item in child.raw[FORK_MARKED]] == ["s0"], "u0 is the run's mark"

    events: list[ProgressEvent] = []
    relaxed = two_tools(effects, risky_effect="idempotent")
    result = await restore_run(space, relaxed, "child", on_progress=events.append)

    assert result.success
    assert of(effects, "child") == ["s0"], "the parent's dispatched u0 never runs again"
    assert [e.tool_call_id for e in events if isinstance(e, ToolOutcomeUnknown)] == ["u0"]
    assert sorted(of(effects, "r1")) == ["s0", "u0"]


async def test_a_fork_at_the_anchor_of_a_marked_call_lists_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards ``fork._mark_started``: at an anchor the fold starts nothing, and the one open call
    is the run's mark, so the child holds no ``FORK_MARKED`` and no team clears that mark."""
    monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)
    monkeypatch.setattr(journal_path, "TAIL_RATIO", 0)
    space = MemoryWorkspace(tmp_path)
    effects: Effects = []
    assert (await run_journal_first(space, two_tools(effects), 1)).success
    points = await run_history(space.store(), "r1")
    # The first dispatch is risky's (its ``tool/call`` precedes its run): an anchor here.
    dispatch = next(p for p in points if p.boundary == "tool_dispatch")

    await fork_run(space.store(), "r1", at_seq=dispatch.seq, new_run_id="child")
    child = await Checkpoint(space.store(), run_id="child").load_latest()
    assert child is not None
    assert FORK_MARKED not in child.raw

    events: list[ProgressEvent] = []
    relaxed = two_tools(effects, risky_effect="idempotent")
    assert (await restore_run(space, relaxed, "child", on_progress=events.append)).success
    assert of(effects, "child") == ["s0"], "s0 had not started at the point: it runs, once"
    assert [e.tool_call_id for e in events if isinstance(e, ToolOutcomeUnknown)] == ["u0"]

"""Crash matrix rows C01-C05 with real processes: the tool calls of a task (crash-matrix.md 3.3).

Each test crashes a child process at one durable boundary of the run (``crash_at``, exit 86) or
inside the tool (before or after its effect; M-exit or SIGKILL), restores the run in a second
process against the same store, and asserts over both processes' ledgers: tool effects, model
calls, accounting, identity, revisions, and equality with an uninterrupted run of the same
scenario. The crash points name boundaries, never store bytes, so the rows hold for any save path.

C02-C05 run with both save paths (``save``: a snapshot per boundary, or journal-first, D10). The
expectations are the same; journal-first each row also says where its state lived when P1 died:
in the tail only (``assert_in_tail_only``: the stored snapshot lacks what P2 did not redo, so the
row goes red if a journal-only save were not durable) or in a compaction (the first boundary of
a task compacts: there is no entry in the snapshot to fold its events onto).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from crash_checks import (
    UNKNOWN,
    GetBaseline,
    assert_resumed,
    assert_same_results,
    assert_unknown,
    call_keys,
    committed_calls,
    dispatched_calls,
    effect_counts,
    in_flight,
    of_type,
    replays_only,
    stored_entry,
)
from crash_harness import Scenario

from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash


# -- C01 ----------------------------------------------------------------------------------------


def test_c01_crash_before_the_first_save(tmp_path: Path, baseline: GetBaseline) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    sc.run(crash="admission:before", expect=CRASH_EXIT)
    assert not sc.store_path.exists()  # nothing was written, not even an empty store
    assert sc.effects() == []  # no tool runs before the first durable save
    assert sc.model_calls() == []

    # restore(team) with nothing stored and no tasks raises and writes nothing (D12).
    noop = sc.run(resume=True, no_tasks=True)
    assert sc.result()["error"] == "CheckpointNotFoundError"
    assert sc.result()["tasks"] == {}
    assert sc.model_calls(noop.pid) == []
    assert not sc.store_path.exists()

    # restore(team, tasks) starts a fresh run.
    p2 = sc.run(resume=True)
    result = sc.result()
    assert_same_results(result, base)
    assert result["attempt"] == 1  # a fresh run, not a continuation
    assert sc.snapshot()["identity"]["attempt"] == 1  # type: ignore[index]
    assert call_keys(sc.model_calls(p2.pid)) == base.call_keys  # the first turn is re-run
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    assert of_type(sc.events(p2.pid), "CheckpointSaveFailed") == []


# -- C02 ----------------------------------------------------------------------------------------


def test_c02_assistant_turn_saved_before_tools_run(
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run(crash="assistant_tool_turn:after@alpha", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    entry = in_flight(before)
    assert entry is not None
    assert entry["phase"] == "executing_tools"
    assert entry["turns"] == 1
    assert sc.effects() == []
    if sc.journaled:
        # alpha's first boundary is journal-only (issue 19): the stored snapshot (the
        # admission) holds no conversation of alpha; the tail carries the whole turn.
        assert_journal_only(sc)

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    # The saved assistant turn is replayed: the pending call runs once, with its saved id.
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    assert {e["pid"] for e in sc.effects()} == {p2.pid}
    fresh = [e for e in of_type(sc.events(p2.pid), "ToolCalled") if not e["replayed"]]
    assert [e["tool_call_id"] for e in fresh] == ["alpha-t0-A"]


def assert_journal_only(sc: Scenario) -> None:
    """alpha's conversation is in the tail alone: the stored snapshot has no entry for it."""
    stored = sc.snapshot()
    assert stored is not None
    assert in_flight(stored) is None, "alpha's first boundary compacted"


# -- C03 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "unsafe"])
def test_c03a_crash_in_tool_before_its_effect(
    tmp_path: Path, save: str, baseline: GetBaseline, mode: str
) -> None:
    base = baseline("chain", mode)
    sc = Scenario(tmp_path, "chain", mode, save=save)
    p1 = sc.run(crash="tool:before_effect", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    [pending] = in_flight(before)["pendingToolCalls"]  # type: ignore[index]
    assert "commit" not in pending
    if sc.journaled:
        # Journal-first the dispatch record is the tail's tool/call (a restore marks it
        # dispatched, D1); the stored snapshot has no mark, so P2's UNKNOWN below comes from
        # the tail. A default tool's tool/call is written with its result: none yet.
        assert ("alpha-t0-A" in sc.started_calls()) is (mode == "unsafe")
        assert dispatched_calls(stored_entry(sc)) == []
    else:
        assert pending.get("dispatched", False) is (mode == "unsafe")
    assert effect_counts(sc.effects(p1.pid)) == {}

    p2 = sc.run(resume=True)
    if mode == "default":
        assert_resumed(sc, p1, p2, base, before)
        assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
        assert effect_counts(sc.effects(p2.pid), "enter") == {"alpha-t0-A": 1}  # same id
    else:
        assert_resumed(sc, p1, p2, base, before, same_results=False)
        assert_unknown(sc, p2.pid, "alpha-t0-A")
        assert effect_counts(sc.effects()) == {}


@pytest.mark.parametrize(("mode", "effects"), [("default", 2), ("idempotent", 1), ("unsafe", 1)])
def test_c03b_crash_in_tool_after_its_effect(
    tmp_path: Path, save: str, baseline: GetBaseline, mode: str, effects: int
) -> None:
    base = baseline("chain", mode)
    sc = Scenario(tmp_path, "chain", mode, save=save)
    p1 = sc.run(crash="tool:after_effect", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}
    if sc.journaled:  # as C03a: an unsafe call's dispatch record is in the tail only
        assert ("alpha-t0-A" in sc.started_calls()) is (mode == "unsafe")
        assert dispatched_calls(stored_entry(sc)) == []

    p2 = sc.run(resume=True)
    # Default tools: the documented window, pinned at 2 so any change is deliberate.
    assert effect_counts(sc.effects()) == {"alpha-t0-A": effects}
    assert len({e["key"] for e in sc.effects()}) == 1  # one idempotency key across both runs
    if mode == "unsafe":
        assert_resumed(sc, p1, p2, base, before, same_results=False)
        assert_unknown(sc, p2.pid, "alpha-t0-A")
    else:
        assert_resumed(sc, p1, p2, base, before)
        dedupes = effect_counts(sc.effects(p2.pid), "dedupe")
        assert dedupes == ({"alpha-t0-A": 1} if mode == "idempotent" else {})


@pytest.mark.parametrize(("mode", "effects"), [("default", 2), ("unsafe", 1)])
def test_c03c_tool_returned_commit_not_landed(
    tmp_path: Path, save: str, baseline: GetBaseline, mode: str, effects: int
) -> None:
    base = baseline("chain", mode)
    sc = Scenario(tmp_path, "chain", mode, save=save)
    p1 = sc.run(crash="tool_commit:before@alpha", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    assert "commit" not in in_flight(before)["pendingToolCalls"][0]  # type: ignore[index]
    assert effect_counts(sc.effects(p1.pid), "return") == {"alpha-t0-A": 1}
    if sc.journaled:  # as C03a: an unsafe call's dispatch record is in the tail only
        assert ("alpha-t0-A" in sc.started_calls()) is (mode == "unsafe")
        assert dispatched_calls(stored_entry(sc)) == []

    p2 = sc.run(resume=True)
    assert effect_counts(sc.effects()) == {"alpha-t0-A": effects}
    if mode == "unsafe":
        assert_resumed(sc, p1, p2, base, before, same_results=False)
        assert_unknown(sc, p2.pid, "alpha-t0-A")
    else:
        assert_resumed(sc, p1, p2, base, before)


def test_c03c_tool_after_return_exit(tmp_path: Path, save: str, baseline: GetBaseline) -> None:
    """The tool returns and the process dies on the next loop turn, before the commit lands."""
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run(crash="tool:after_return", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    assert "commit" not in in_flight(before)["pendingToolCalls"][0]  # type: ignore[index]
    if sc.journaled:  # the commit never landed: P1's last save was alpha's first (the tail's)
        assert_journal_only(sc)
    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 2}


def test_c03b_sigkill_after_effect(tmp_path: Path, save: str, baseline: GetBaseline) -> None:
    """M-kill: SIGKILL while the tool blocks after its effect gives the same outcome as M-exit."""
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run_until_ready_then_kill(crash="kill:tool_after_effect")
    before = sc.state()
    assert before is not None
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}
    if sc.journaled:  # as C03c: nothing past alpha's first save (the tail's)
        assert_journal_only(sc)
    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 2}


# -- C04 ----------------------------------------------------------------------------------------


def test_c04_all_calls_committed_before_the_results_message(
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("witherror")
    sc = Scenario(tmp_path, "witherror", save=save)
    # Every call's commit is durable; the results message (the next boundary) is not.
    p1 = sc.run(crash="tool_results:before@alpha", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    entry = in_flight(before)
    assert entry is not None
    assert entry["turns"] == 1
    errors = [c["commit"]["result"].get("is_error", False) for c in entry["pendingToolCalls"]]
    assert errors == [False, True]  # the error result is committed like any other
    if sc.journaled:  # both commits are in the tail only; P2 below runs no tool
        assert committed_calls(stored_entry(sc)) == []

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert sc.effects(p2.pid) == []  # nothing re-runs
    assert effect_counts(sc.effects(p1.pid), "enter") == {"alpha-t0-P": 1, "alpha-t0-boom": 1}
    # Every result replayed verbatim, error included, in the original call order.
    [turn1] = [c for c in sc.model_calls(p2.pid) if c["task"] == "alpha"]
    assert turn1["turn"] == 1
    assert turn1["seen"] == base.seen("alpha", 1)
    assert [item[0] for item in turn1["seen"]] == ["alpha-t0-P", "alpha-t0-boom"]
    for call_id in ("alpha-t0-P", "alpha-t0-boom"):
        replays_only(sc.events(p2.pid), call_id)
    assert sc.result()["tasks"]["alpha"]["turns"] == 2  # turns went up exactly once


# -- C05 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "gate", "q_effects"),
    [
        ("default", "q_before_effect", 1),
        ("default", "q_after_effect", 2),
        ("unsafe", "q_after_effect", 1),
    ],
)
def test_c05_between_sibling_commits(
    tmp_path: Path, save: str, baseline: GetBaseline, mode: str, gate: str, q_effects: int
) -> None:
    base = baseline("parallel", mode)
    sc = Scenario(tmp_path, "parallel", mode, save=save)
    # The gate holds Q in the tool, so alpha's first durable commit is P's.
    p1 = sc.run(crash="tool_commit:after@alpha", gate=gate, expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    committed = [("commit" in c) for c in in_flight(before)["pendingToolCalls"]]  # type: ignore[index]
    assert committed == [True, False]
    if sc.journaled:  # P's commit is in the tail only; P2 below never runs P
        assert committed_calls(stored_entry(sc)) == []
    p1_effects = effect_counts(sc.effects(p1.pid))
    assert p1_effects["alpha-t0-P"] == 1
    assert p1_effects["alpha-t0-Q"] == (1 if gate == "q_after_effect" else 0)

    p2 = sc.run(resume=True)
    effects = effect_counts(sc.effects())
    assert effects == {"alpha-t0-P": 1, "alpha-t0-Q": q_effects}
    assert "alpha-t0-P" not in effect_counts(sc.effects(p2.pid), "enter")  # P never twice
    replays_only(sc.events(p2.pid), "alpha-t0-P")
    [turn1] = [c for c in sc.model_calls(p2.pid) if c["task"] == "alpha"]
    assert [item[0] for item in turn1["seen"]] == ["alpha-t0-P", "alpha-t0-Q"]  # model order
    if mode == "unsafe":
        assert_resumed(sc, p1, p2, base, before, same_results=False)
        assert [e["tool_call_id"] for e in of_type(sc.events(p2.pid), "ToolOutcomeUnknown")] == [
            "alpha-t0-Q"
        ]
        assert UNKNOWN in turn1["seen"][1][1]
        assert turn1["seen"][1][2] is True
        assert turn1["seen"][0] == base.seen("alpha", 1)[0]
    else:
        assert_resumed(sc, p1, p2, base, before)
        assert turn1["seen"] == base.seen("alpha", 1)

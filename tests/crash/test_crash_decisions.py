"""Crash matrix rows C11a-C11c with real processes: decisions made in another process.

P1 suspends on an approval gate and exits; a reviewer decides in a process of its own
(``oma approvals decide``, or ``crash_child.py decide``, which can crash around the approval
ledger's compare-and-set); the run is restored in fresh processes, which may crash again after
the approved tool's effect. Every test asserts over all the processes: tool effects, model
calls, gate calls, the approval rows and the decisions the results report.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from approval_checks import (
    DENIED,
    GATED_CALL,
    assert_decision,
    gated,
    gates,
    one_row,
    read_record,
    reported,
    saved_pending,
    suspend,
)
from crash_checks import UNKNOWN, GetBaseline, assert_resumed, effect_counts, in_flight, of_type
from crash_harness import Scenario

from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash


def test_c11a_tool_approved_by_another_process_runs_once(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", approval="tool")
    p1, before, request = suspend(sc)
    sc.decide_with_cli(*request, "approve", reviewer="alice")
    one_row(sc, request, "approved", "alice")
    assert saved_pending(sc.snapshot() or {}) == [request]  # the reviewer touched only the row

    p2 = sc.run(resume=True)
    after = assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {GATED_CALL: 1}
    assert {e["pid"] for e in sc.effects()} == {p2.pid}
    assert gates(sc) == Counter([gated("tool")])  # the gate is not asked again
    assert reported(sc, p2) == []
    assert_decision(sc, request, "approved", "alice")
    assert saved_pending(after) == []
    assert [d["requestId"] for d in after["approvalDecisions"]] == [request[0]]

    # Restoring the final checkpoint again does no work: the approved tool never runs twice.
    p3 = sc.run(resume=True)
    assert sc.model_calls(p3.pid) == []
    assert sc.effects(p3.pid) == []
    assert effect_counts(sc.effects()) == {GATED_CALL: 1}
    one_row(sc, request, "approved", "alice")


def test_c11a_tool_rejected_by_another_process_is_a_denial(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", approval="tool")
    p1, before, request = suspend(sc)
    sc.decide_with_cli(*request, "reject", reviewer="bob")

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before, same_results=False)
    assert sc.effects() == []  # the tool is never entered
    assert gates(sc) == Counter([gated("tool")])
    # The model's next turn sees the denial as the call's error result.
    [seen] = [c["seen"] for c in sc.model_calls(p2.pid) if c["task"] == "alpha"]
    assert seen == [[GATED_CALL, DENIED, True]]
    assert DENIED in sc.result()["tasks"]["alpha"]["output"]
    assert_decision(sc, request, "rejected", "bob")


def test_c11a_dispatch_approved_by_another_process_runs_once(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", approval="dispatch")
    p1, before, request = suspend(sc)
    assert sc.model_calls() == []  # the worker never ran
    assert [t["status"] for t in before["queue"]["tasks"]] == ["pending", "blocked"]
    sc.decide_with_cli(*request, "approve", reviewer="alice")

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {GATED_CALL: 1}
    # alpha's approved dispatch is consumed without the gate; beta's is asked as usual.
    assert gates(sc, p2.pid) == Counter([("dispatch", "beta", "allow")])
    assert gates(sc) == Counter([gated("dispatch"), ("dispatch", "beta", "allow")])
    assert_decision(sc, request, "approved", "alice")


def test_c11a_dispatch_rejected_is_terminal_across_restores(tmp_path: Path) -> None:
    sc = Scenario(tmp_path, "chain", approval="dispatch")
    _, before, request = suspend(sc)
    sc.decide_with_cli(*request, "reject", reviewer="bob")

    sc.run(resume=True)
    result = sc.result()
    assert (result["status"], result["success"]) == ("rejected", False)
    assert {t["status"] for t in result["tasks"].values()} == {"skipped"}
    assert_decision(sc, request, "rejected", "bob")
    after = sc.snapshot()
    assert after is not None
    assert after["identity"]["attempt"] == result["attempt"] == before["identity"]["attempt"] + 1
    assert after["revision"] == before["revision"] + 1
    assert saved_pending(after) == []

    p3 = sc.run(resume=True)
    again = sc.result()
    assert (again["status"], again["success"]) == ("rejected", False)
    assert {t["status"] for t in again["tasks"].values()} == {"skipped"}
    assert_decision(sc, request, "rejected", "bob")
    assert sc.snapshot() == after  # terminal: no work, no save
    assert of_type(sc.events(p3.pid), "CheckpointSaved") == []
    assert sc.model_calls() == []
    assert sc.effects() == []
    assert gates(sc) == Counter([gated("dispatch")])


# -- C11b -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "effects"),
    [
        ("default", 2),
        ("idempotent", 1),
        ("unsafe", 1),  # its strict dispatch save rewrites the task in progress before the effect
    ],
)
def test_c11b_approved_tool_crashes_after_its_effect(
    tmp_path: Path, baseline: GetBaseline, mode: str, effects: int
) -> None:
    base = baseline("chain", mode)
    sc = Scenario(tmp_path, "chain", mode, approval="tool")
    p1, _, request = suspend(sc)
    sc.decide_with_cli(*request, "approve", reviewer="alice")
    decided = one_row(sc, request, "approved", "alice")

    p2 = sc.run(resume=True, crash="tool:after_effect", expect=CRASH_EXIT)
    assert effect_counts(sc.effects(p2.pid)) == {GATED_CALL: 1}
    before = sc.snapshot()
    assert before is not None
    entry = in_flight(before)
    assert entry is not None
    [call] = entry["pendingToolCalls"]
    assert "commit" not in call
    assert call["approvalRequest"]["id"] == request[0]
    assert call.get("dispatched", False) is (mode == "unsafe")

    p3 = sc.run(resume=True)
    # The same decision is applied: the reviewer is not asked again and no request is made.
    assert one_row(sc, request, "approved", "alice") == decided
    assert gates(sc) == Counter([gated("tool")])
    assert reported(sc, p2) == reported(sc, p3) == []
    assert_decision(sc, request, "approved", "alice")
    # The effect window of C03b, unchanged by the approval.
    assert effect_counts(sc.effects()) == {GATED_CALL: effects}
    if mode == "unsafe":
        assert_resumed(sc, p2, p3, base, before, same_results=False, earlier=(p1,))
        assert sc.effects(p3.pid) == []  # not re-run
        unknown = of_type(sc.events(p3.pid), "ToolOutcomeUnknown")
        assert [e["tool_call_id"] for e in unknown] == [GATED_CALL]
        [seen] = [c["seen"] for c in sc.model_calls(p3.pid) if c["task"] == "alpha"]
        [[call_id, text, is_error]] = seen
        assert (call_id, is_error) == (GATED_CALL, True)
        assert UNKNOWN in text
    else:
        assert_resumed(sc, p2, p3, base, before, earlier=(p1,))
        dedupes = effect_counts(sc.effects(p3.pid), "dedupe")
        assert dedupes == ({GATED_CALL: 1} if mode == "idempotent" else {})


def test_restore_dies_right_after_its_admission_save(tmp_path: Path, baseline: GetBaseline) -> None:
    """The C11b failure without approvals: P2 dies right after its first (admission) save."""
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="assistant_tool_turn:after@alpha", expect=CRASH_EXIT)
    p2 = sc.run(resume=True, crash="admission:after", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    assert before["identity"]["attempt"] == 2  # P2's admission save landed

    p3 = sc.run(resume=True)
    assert_resumed(sc, p2, p3, base, before, earlier=(p1,))
    assert effect_counts(sc.effects()) == {GATED_CALL: 1}


# -- C11c -----------------------------------------------------------------------------------------


def test_c11c_reviewer_crashes_before_its_decision_lands(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", approval="tool")
    p1, before, request = suspend(sc)
    raw = sc.store_path.read_bytes()

    _, said = sc.decide(*request, "approve", crash="before", expect=CRASH_EXIT)
    assert said == {}  # the reviewer never heard back
    assert sc.store_path.read_bytes() == raw  # nothing was written
    one_row(sc, request)  # no decision
    assert read_record(sc.store_path, request[0]) is None

    _, said = sc.decide(*request, "approve")  # the retry succeeds
    assert (said["decision"], said["reviewer"]) == ("approved", "reviewer-1")
    one_row(sc, request, "approved", "reviewer-1")
    assert read_record(sc.store_path, request[0]) == ("approved", "reviewer-1")

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {GATED_CALL: 1}
    assert gates(sc) == Counter([gated("tool")])
    assert_decision(sc, request, "approved", "reviewer-1")


def test_c11c_reviewer_crashes_after_its_decision_landed(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", approval="tool")
    p1, before, request = suspend(sc)

    _, said = sc.decide(*request, "approve", crash="after", expect=CRASH_EXIT)
    assert said == {}  # the decision landed, but the reviewer never heard so
    row = one_row(sc, request, "approved", "reviewer-1")
    raw = sc.store_path.read_bytes()

    # A blind retry with a different decision is refused: the first decision wins ...
    _, said = sc.decide(*request, "reject", expect=1)
    assert said["error"] == "APPROVAL_CONFLICT"
    cli = sc.decide_with_cli(*request, "reject", reviewer="reviewer-1", expect=2)
    assert cli.stdout == ""  # a refusal is one line on stderr (exit 2), never on stdout
    assert "APPROVAL_CONFLICT" in cli.stderr
    assert "already decided: approved by reviewer-1" in cli.stderr
    # ... while repeating the decision that landed is answered from the row, unchanged.
    _, said = sc.decide(*request, "approve")
    assert (said["decision"], said["reviewer"]) == ("approved", "reviewer-1")
    assert said["decided_at"] == row["decision"]["decidedAt"]  # not a new decision
    assert sc.store_path.read_bytes() == raw  # no retry wrote anything
    # The reviewer's read-back shows the decision.
    assert read_record(sc.store_path, request[0]) == ("approved", "reviewer-1")

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {GATED_CALL: 1}
    assert gates(sc) == Counter([gated("tool")])
    assert_decision(sc, request, "approved", "reviewer-1")
    assert sc.approval_rows()[request[0]] == row  # the restore did not touch the decided row

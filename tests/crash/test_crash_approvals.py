"""Crash matrix rows C10a-C10c and C11a-C11c with real processes: durable approvals.

A child process runs the ``chain`` scenario with an approval gate that suspends either the
ledger call ``alpha-t0-A`` (``--approval tool``) or the dispatch of task ``alpha``
(``--approval dispatch``). It is crashed around the suspension (strict checkpoint save, then the
``__oma_approval__/<id>`` row, then ``ApprovalPending``); a reviewer decides in a process of its
own (``oma approvals decide`` or ``crash_child.py decide``, which can crash around the ledger's
compare-and-set); and the run is restored in fresh processes. Every test asserts over all the
processes: tool effects (``effects.jsonl``), model calls, gate calls (``gates.jsonl``), the run
identity, the request id and hash each process saw, and the approval rows read from the store file
with plain ``json``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from crash_child import CRASH_EXIT, RUN_ID
from crash_harness import (
    Child,
    GetBaseline,
    Scenario,
    assert_resumed,
    call_keys,
    effect_counts,
    in_flight,
    of_type,
)

from oma_actors import FileStore
from oma_actors.approvals import get_approval_record

pytestmark = pytest.mark.crash

GATED_CALL = "alpha-t0-A"  # the ledger call --approval tool suspends
UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
DENIED = 'Tool "ledger" denied by durable approval.'

Request = tuple[str, str]  # (request id, request hash)


# -- what each party saw ------------------------------------------------------------------------


def reported(sc: Scenario, child: Child) -> list[Request]:
    """The requests ``child`` announced with ``ApprovalPending``, in order."""
    events = of_type(sc.events(child.pid), "ApprovalPending")
    return [(e["request_id"], e["request_hash"]) for e in events]


def saved_pending(snapshot: dict[str, Any]) -> list[Request]:
    """The checkpoint's ``pendingApprovals`` as ``(id, hash)``."""
    return [(r["id"], r["requestHash"]) for r in snapshot.get("pendingApprovals") or []]


def result_pending(sc: Scenario) -> list[Request]:
    """The last finished process's ``result.pending_approvals`` as ``(id, hash)``."""
    return [(r["id"], r["hash"]) for r in sc.result()["pending_approvals"]]


def gates(sc: Scenario, pid: int | None = None) -> Counter[tuple[str, str, str]]:
    """Gate calls as a multiset of ``(gate, target, answer)``."""
    return Counter((g["gate"], g["target"], g["answer"]) for g in sc.gate_calls(pid))


def gated(scope: str) -> tuple[str, str, str]:
    """The gate call that suspends in ``scope``."""
    return ("tool", GATED_CALL, "suspend") if scope == "tool" else ("dispatch", "alpha", "suspend")


def one_row(
    sc: Scenario, request: Request, decision: str | None = None, reviewer: str | None = None
) -> dict[str, Any]:
    """Exactly one approval row exists: ``request``'s, with ``decision`` (or none) by ``reviewer``."""
    rows = sc.approval_rows()
    assert list(rows) == [request[0]], rows
    row = rows[request[0]]
    assert (row["request"]["id"], row["request"]["requestHash"]) == request
    assert row["request"]["runId"] == RUN_ID
    if decision is None:
        assert "decision" not in row
    else:
        assert row["decision"]["decision"] == decision
        assert row["decision"]["requestId"] == request[0]
        assert row["decision"]["requestHash"] == request[1]
        assert row["decision"]["reviewer"]["id"] == reviewer
    return row


def read_record(store_path: Path, request_id: str) -> tuple[str, str] | None:
    """``get_approval_record`` in a fresh FileStore: ``(decision, reviewer)``, or ``None``."""

    async def read() -> tuple[str, str] | None:
        record = await get_approval_record(FileStore(store_path), request_id)
        assert record is not None
        if record.decision is None:
            return None
        return record.decision.decision, record.decision.reviewer.id

    return asyncio.run(read())


def assert_still_suspended(
    sc: Scenario, child: Child, before: dict[str, Any], request: Request
) -> None:
    """A restore with no decision (AP-31): suspended again, no work, no gate, no save."""
    result = sc.result()
    assert (result["status"], result["success"]) == ("suspended", False)
    assert result["run_id"] == RUN_ID
    assert result["attempt"] == before["identity"]["attempt"]  # nothing was persisted
    assert result_pending(sc) == [request]
    assert result["approval_decisions"] == []
    assert sc.model_calls(child.pid) == []
    assert sc.effects(child.pid) == []
    assert sc.gate_calls(child.pid) == []
    assert of_type(sc.events(child.pid), "CheckpointSaved") == []
    assert set(reported(sc, child)) <= {request}  # no new request id
    assert sc.snapshot() == before


# -- C10a -----------------------------------------------------------------------------------------


def suspend_then_lose_the_row(sc: Scenario) -> tuple[Child, dict[str, Any], Request]:
    """P1 saves the suspension strictly and dies before the approval row's compare-and-set."""
    p1 = sc.run(crash="store:approval_row:before", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    [request] = saved_pending(before)
    assert sc.approval_rows() == {}  # R2 is missing
    assert reported(sc, p1) == []  # never reported without the row (AP-20)
    assert sc.effects() == []
    return p1, before, request


@pytest.mark.parametrize("scope", ["tool", "dispatch"])
def test_c10a_row_lost_after_the_suspension_save(tmp_path: Path, scope: str) -> None:
    sc = Scenario(tmp_path, "chain", approval=scope)
    _, before, request = suspend_then_lose_the_row(sc)
    assert gates(sc) == Counter([gated(scope)])
    if scope == "tool":
        [call] = in_flight(before)["pendingToolCalls"]  # type: ignore[index]
        assert call["approvalRequest"]["id"] == request[0]
        assert "commit" not in call
        assert call_keys(sc.model_calls()) == Counter([("worker", "worker", "alpha", 0)])
    else:
        assert sc.model_calls() == []

    # P2: ensure_request recreates the row from the checkpoint, with the same id and hash.
    p2 = sc.run(resume=True)
    assert_still_suspended(sc, p2, before, request)
    row = one_row(sc, request)
    [saved] = before["pendingApprovals"]
    assert row["request"] == saved  # the whole request, requestedAt and reason included

    # P3: restoring again finds the identical row (idempotent; no CAS conflict).
    raw = sc.store_path.read_bytes()
    p3 = sc.run(resume=True)
    assert_still_suspended(sc, p3, before, request)
    assert sc.store_path.read_bytes() == raw  # no write at all
    # Gated work done over all processes: none.
    assert sc.effects() == []
    assert gates(sc) == Counter([gated(scope)])


def test_c10a_approval_pending_is_emitted_at_least_once(tmp_path: Path) -> None:
    sc = Scenario(tmp_path, "chain", approval="tool")
    p1, _, request = suspend_then_lose_the_row(sc)
    p2 = sc.run(resume=True)
    assert sc.result()["status"] == "suspended"
    assert reported(sc, p1) + reported(sc, p2) == [request]


# -- C10b -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "how"),
    [("tool", "exit"), ("tool", "kill"), ("dispatch", "exit"), ("dispatch", "kill")],
)
def test_c10b_suspended_and_reported(tmp_path: Path, scope: str, how: str) -> None:
    sc = Scenario(tmp_path, "chain", approval=scope)
    if how == "exit":
        p1 = sc.run()
        result = sc.result()
        assert (result["status"], result["success"]) == ("suspended", False)
        assert result["attempt"] == 1
        [request] = reported(sc, p1)
        assert result_pending(sc) == [request]
    else:
        # SIGKILL right after ApprovalPending: the save and the row are durable by then.
        p1 = sc.run_until_ready_then_kill(crash="kill:approval_pending")
        [request] = reported(sc, p1)
    before = sc.snapshot()
    assert before is not None
    assert saved_pending(before) == [request]
    one_row(sc, request)
    assert sc.effects() == []
    assert gates(sc) == Counter([gated(scope)])
    p1_calls = call_keys(sc.model_calls())

    # No decision: every restore is suspended again with the same request and does nothing.
    for _ in range(2):
        p = sc.run(resume=True)
        assert_still_suspended(sc, p, before, request)
        one_row(sc, request)  # no second row
    assert call_keys(sc.model_calls()) == p1_calls  # 0 model calls after P1
    assert sc.effects() == []  # 0 tool calls for the gated item (no enter line at all)
    assert gates(sc) == Counter([gated(scope)])


# -- C10c -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["tool", "dispatch"])
def test_c10c_suspension_save_not_landed(tmp_path: Path, scope: str) -> None:
    sc = Scenario(tmp_path, "chain", approval=scope)
    p1 = sc.run(crash="store:suspension:before", expect=CRASH_EXIT)
    [lost] = sc.lost_writes()
    [lost_request] = [(r["id"], r["hash"]) for r in lost["pending"]]
    before = sc.snapshot()
    assert before is not None
    # Back at the previous boundary: nothing about the request is durable or reported.
    assert saved_pending(before) == []
    assert sc.approval_rows() == {}
    assert reported(sc, p1) == []
    if scope == "tool":
        entry = in_flight(before)
        assert entry is not None
        assert entry["phase"] == "executing_tools"
        [call] = entry["pendingToolCalls"]
        assert "approvalRequest" not in call
    else:
        assert not before.get("inFlightTasks")

    # P2 asks the gate again and makes the identical, deterministic request.
    p2 = sc.run(resume=True)
    result = sc.result()
    assert (result["status"], result["success"]) == ("suspended", False)
    assert gates(sc, p1.pid) == gates(sc, p2.pid) == Counter([gated(scope)])  # count 2 overall
    assert reported(sc, p2) == [lost_request]
    assert result_pending(sc) == [lost_request]
    one_row(sc, lost_request)
    after = sc.snapshot()
    assert after is not None
    assert saved_pending(after) == [lost_request]
    assert after["identity"]["runId"] == result["run_id"] == RUN_ID
    assert after["identity"]["attempt"] == result["attempt"] == before["identity"]["attempt"] + 1
    assert after["revision"] > before["revision"]
    # The saved assistant turn is not asked again; the gated work never ran.
    assert sc.model_calls(p2.pid) == []
    assert sc.effects() == []


# -- C11a -----------------------------------------------------------------------------------------


def suspend(sc: Scenario) -> tuple[Child, dict[str, Any], Request]:
    """P1 runs until the gate suspends, reports the request and exits normally."""
    p1 = sc.run()
    assert sc.result()["status"] == "suspended"
    [request] = reported(sc, p1)
    assert result_pending(sc) == [request]
    before = sc.snapshot()
    assert before is not None
    assert saved_pending(before) == [request]
    one_row(sc, request)
    assert sc.effects() == []
    return p1, before, request


def assert_decision(sc: Scenario, request: Request, decision: str, reviewer: str) -> None:
    """The result's ``approval_decisions`` is the ledger's decision, no pending request is left."""
    row = one_row(sc, request, decision, reviewer)
    [found] = sc.result()["approval_decisions"]
    assert (found["request_id"], found["hash"]) == request
    assert (found["decision"], found["reviewer"]) == (decision, reviewer)
    assert found["decided_at"] == row["decision"]["decidedAt"]
    assert sc.result()["pending_approvals"] == []


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
    p1 = sc.run(crash="store:assistant_saved:after", expect=CRASH_EXIT)
    p2 = sc.run(resume=True, crash="store:first:after", expect=CRASH_EXIT)
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
    cli = sc.decide_with_cli(*request, "reject", reviewer="reviewer-1", expect=1)
    assert "APPROVAL_CONFLICT" in cli.stdout
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

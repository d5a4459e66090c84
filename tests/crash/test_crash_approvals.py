"""Crash matrix rows C10a-C10c with real processes: a run crashed around its suspension.

A child process runs the ``chain`` scenario with an approval gate that suspends either the
ledger call ``alpha-t0-A`` (``--approval tool``) or the dispatch of task ``alpha``
(``--approval dispatch``). The suspension is a strict save (the boundary
``approval_requested``), then the ``__oma_approval__/<id>`` row, then ``ApprovalPending``; the
child dies before that save (C10c), after it but before the row (C10a), or after the event
(C10b), and the run is restored in fresh processes. Every test asserts over all the processes:
tool effects, model calls, gate calls, the run identity, the request id and hash each process
saw, and the approval rows read from the store file with plain ``json``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from approval_checks import (
    Request,
    assert_still_suspended,
    derived,
    gated,
    gates,
    one_row,
    reported,
    result_pending,
    saved_pending,
)
from crash_checks import call_keys, in_flight
from crash_harness import Child, Scenario
from crash_scenarios import RUN_ID

from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash

# -- C10a -----------------------------------------------------------------------------------------


def suspend_then_lose_the_row(sc: Scenario) -> tuple[Child, dict[str, Any], Request]:
    """P1 saves the suspension strictly and dies before the approval row's compare-and-set.

    The row is written only after the suspension save is durable, so dying right after that
    save (its ``after`` report) is dying before the row.
    """
    p1 = sc.run(crash="approval_requested:after@alpha", expect=CRASH_EXIT)
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
    assert derived(sc, p1) == [request]  # the gate ledger's request is the runtime's
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
    p1 = sc.run(crash="approval_requested:before@alpha", expect=CRASH_EXIT)
    # What P1 was about to make durable: the request its gate's answer turned into, logged
    # before the suspension save (the crash point is a boundary, so no store bytes are read).
    [expected] = derived(sc, p1)
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
    assert reported(sc, p2) == [expected]
    assert result_pending(sc) == [expected]
    one_row(sc, expected)
    after = sc.snapshot()
    assert after is not None
    assert saved_pending(after) == [expected]
    assert after["identity"]["runId"] == result["run_id"] == RUN_ID
    assert after["identity"]["attempt"] == result["attempt"] == before["identity"]["attempt"] + 1
    assert after["revision"] > before["revision"]
    # The saved assistant turn is not asked again; the gated work never ran.
    assert sc.model_calls(p2.pid) == []
    assert sc.effects() == []

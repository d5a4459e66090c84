"""What each party of a durable approval saw, and the checks the approval crash rows share.

The parties are the crashed and restored run processes (their ``ApprovalPending`` events, their
results and the checkpoint they left), the gates (``gates.jsonl``) and the approval ledger's rows,
read from the store file with plain ``json`` as a third party would.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from crash_checks import of_type
from crash_harness import Child, Scenario
from crash_scenarios import RUN_ID

from oma_actors.approvals import get_approval_record
from oma_actors.stores import FileStore

GATED_CALL = "alpha-t0-A"  # the ledger call --approval tool suspends
DENIED = 'Tool "ledger" denied by durable approval.'

Request = tuple[str, str]  # (request id, request hash)

# -- what each party saw ------------------------------------------------------------------------


def reported(sc: Scenario, child: Child) -> list[Request]:
    """The requests ``child`` announced with ``ApprovalPending``, in order."""
    events = of_type(sc.events(child.pid), "ApprovalPending")
    return [(e["request_id"], e["request_hash"]) for e in events]


def derived(sc: Scenario, child: Child) -> list[Request]:
    """The requests ``child``'s gates turned their ``suspend`` answers into (``gates.jsonl``)."""
    calls = sc.gate_calls(child.pid)
    return [(g["request_id"], g["request_hash"]) for g in calls if g["answer"] == "suspend"]


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

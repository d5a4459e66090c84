"""What a run is: its run record decides, the registry stores no status (D16).

Unit tests of ``sidecar.authority.view_of``. Among them: a run nobody holds is interrupted a TTL
after the run record was last written (its lease given up), not a TTL after the registry last
wrote. An attempt that stopped on an unreachable store gives its lease up as the store returns
and goes on at once; counted from the registry's last write (the run's start, long before), the
run showed INTERRUPTED for that moment and was adopted (attempt 2) after a 1 s outage.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sidecar_helpers import run_request

from oma_actors.runs import Lease, RunRecord
from oma_actors.runs import RunStatus as RecordStatus
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.authority import INTERRUPTED, view_of
from sidecar.record import Outcome, RunRecordV1, RunView

NOW = datetime(2026, 12, 4, 21, 0, tzinfo=UTC)
TTL = 6.0
NO_OUTCOME = Outcome()
LONG_AGO = NOW - timedelta(seconds=60)


def registry_record(
    written: datetime = LONG_AGO,
    *,
    forked: bool = False,
    outcome: Outcome = NO_OUTCOME,
    legacy: pb.RunStatus | None = None,
    legacy_pending: tuple[str, ...] = (),
) -> RunRecordV1:
    return RunRecordV1(
        run_id="r1",
        request_id="q1",
        request=run_request("r1"),
        forked=forked,
        created_at=written,
        updated_at=written,
        outcome=outcome,
        legacy_status=legacy,
        legacy_pending=legacy_pending,
    )


def run_record(
    written: datetime,
    lease: Lease | None = None,
    status: RecordStatus = "running",
    outcome: dict[str, object] | None = None,
    waiting_for: tuple[str, ...] | None = None,
) -> RunRecord:
    suspension: dict[str, object] | None = (
        None
        if waiting_for is None
        else {"suspendedAt": "2026-12-04T21:00:00.000Z", "pendingApprovalIds": list(waiting_for)}
    )
    return RunRecord(
        run_id="r1", version=3, status=status, attempt=1, fencing_token=1,
        created_at=written, updated_at=written, lease=lease, outcome=outcome,
        suspension=suspension,
    )  # fmt: skip


def view(record: RunRecordV1, lease: RunRecord | None, **kwargs: Any) -> RunView:
    return view_of(record, lease, now=NOW, ttl=TTL, **kwargs)


def test_a_lease_given_up_just_now_is_not_yet_interrupted() -> None:
    # Its attempt stopped on a short store outage and goes on: nothing visible changes.
    shown = view(registry_record(), run_record(NOW - timedelta(seconds=1)))
    assert shown.status == pb.RUN_STATUS_RUNNING


def test_a_lease_given_up_a_ttl_ago_is_interrupted() -> None:
    given_up = NOW - timedelta(seconds=TTL + 1)
    shown = view(registry_record(NOW - timedelta(seconds=1)), run_record(given_up))
    assert (shown.status, shown.outcome) == (pb.RUN_STATUS_INTERRUPTED, INTERRUPTED)


def test_a_run_without_a_run_record_counts_from_the_registry() -> None:
    assert view(registry_record(NOW), None).status == pb.RUN_STATUS_QUEUED
    old = registry_record(NOW - timedelta(seconds=TTL + 1))
    assert view(old, None).status == pb.RUN_STATUS_INTERRUPTED


def test_a_held_lease_runs_and_a_lapsed_one_interrupts() -> None:
    live = Lease("owner-a", LONG_AGO, NOW + timedelta(seconds=3))
    lapsed = Lease("owner-a", LONG_AGO, NOW - timedelta(seconds=1))
    record = registry_record()
    running = view(record, run_record(LONG_AGO, live))
    assert (running.status, running.holder) == (pb.RUN_STATUS_RUNNING, "owner-a")
    interrupted = view(record, run_record(LONG_AGO, lapsed))
    assert (interrupted.status, interrupted.holder) == (pb.RUN_STATUS_INTERRUPTED, "")


def test_the_run_record_decides_whatever_the_registry_last_told() -> None:
    """The registry's outcome of an attempt that suspended does not make the run suspended
    once a restore elsewhere took its run record (and has not written the registry yet)."""
    suspended = registry_record(outcome=Outcome(code="suspended"))
    live = Lease("owner-b", NOW, NOW + timedelta(seconds=3))
    shown = view(suspended, run_record(NOW, live))
    assert (shown.status, shown.outcome) == (pb.RUN_STATUS_RUNNING, NO_OUTCOME)


def test_a_settled_run_record_names_the_status_and_the_attempt_the_outcome() -> None:
    failed = run_record(NOW, status="failed", outcome={"code": "error", "message": "boom"})
    shown = view(registry_record(), failed)
    assert (shown.status, shown.outcome) == (
        pb.RUN_STATUS_FAILED,
        Outcome(code="error", message="boom"),
    )
    assert shown.updated_at == NOW  # the run record's last change
    # The attempt's sidecar names more (the host calls that timed out): its outcome is shown.
    told = Outcome(code="TOOL_FAILED", message="boom; host call c1 timed out")
    assert view(registry_record(outcome=told), failed).outcome == told
    suspended = view(registry_record(), run_record(NOW, status="suspended"))
    assert (suspended.status, suspended.outcome.code) == (pb.RUN_STATUS_SUSPENDED, "suspended")


def test_an_attempt_executing_here_shows_its_own_status_until_it_has_written_its_end() -> None:
    completed = run_record(NOW, status="completed", outcome={"code": "ok"})
    here = view(registry_record(), completed, here=pb.RUN_STATUS_RUNNING)
    assert here.status == pb.RUN_STATUS_RUNNING
    assert view(registry_record(), None, here=pb.RUN_STATUS_QUEUED).status == pb.RUN_STATUS_QUEUED


def test_a_forked_run_nobody_started_is_interrupted_at_once() -> None:
    child = registry_record(NOW, forked=True)
    assert view(child, None).status == pb.RUN_STATUS_INTERRUPTED


def test_a_record_from_before_d16_shows_its_stored_status_while_it_has_no_run_record() -> None:
    done = registry_record(legacy=pb.RUN_STATUS_COMPLETED)
    assert view(done, None).status == pb.RUN_STATUS_COMPLETED
    running = registry_record(NOW, legacy=pb.RUN_STATUS_RUNNING)
    assert view(running, None).status == pb.RUN_STATUS_QUEUED  # then interrupted, a TTL on
    assert view(registry_record(legacy=pb.RUN_STATUS_RUNNING), None).status == (
        pb.RUN_STATUS_INTERRUPTED
    )
    # Once it has a run record, the run record decides.
    cancelled = run_record(NOW, status="cancelled", outcome={"code": "cancelled"})
    assert view(done, cancelled).status == pb.RUN_STATUS_CANCELLED


def test_the_approvals_a_run_waits_for_are_its_run_record_s_suspension() -> None:
    # The registry keeps none (D16): one record says what a suspended run waits for.
    stored = registry_record()
    suspended = run_record(NOW, status="suspended", waiting_for=("ap-1", "ap-2"))
    assert view(stored, suspended).pending_approvals == ("ap-1", "ap-2")
    # A run that went on and ended waits for nothing, whatever suspension its record kept.
    ended = run_record(NOW, status="completed", outcome={"code": "ok"}, waiting_for=("ap-1",))
    assert view(stored, ended).pending_approvals == ()
    # OMA's record may be suspended without saying on what.
    assert view(stored, run_record(NOW, status="suspended")).pending_approvals == ()
    # An attempt executing here shows the approvals its events asked for.
    here = view(stored, suspended, here=pb.RUN_STATUS_RUNNING, waiting=["ap-3"])
    assert here.pending_approvals == ("ap-3",)
    # A record from before D16, while it has no run record, shows those it stored.
    old = registry_record(legacy=pb.RUN_STATUS_SUSPENDED, legacy_pending=("ap-0",))
    assert view(old, None).pending_approvals == ("ap-0",)
    assert view(old, suspended).pending_approvals == ("ap-1", "ap-2")

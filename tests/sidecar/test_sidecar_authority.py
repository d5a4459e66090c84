"""What status a run shows when it executes elsewhere or nowhere: the run record decides (D16).

Unit tests of ``sidecar.authority.shown``: a run nobody holds is interrupted a TTL after the run
record was last written (its lease given up), not a TTL after the registry last wrote. An
attempt that stopped on an unreachable store gives its lease up as the store returns and goes
on at once; counted from the registry's last write (the run's start, long before), the run
showed INTERRUPTED for that moment and was adopted (attempt 2) after a 1 s outage.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sidecar_helpers import run_request

from oma_actors.runs import Lease, RunRecord, RunStatus
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.authority import shown
from sidecar.record import Outcome, RunRecordV1

NOW = datetime(2026, 12, 4, 21, 0, tzinfo=UTC)
TTL = 6.0
NO_OUTCOME = Outcome()


def registry_record(
    written: datetime, status: pb.RunStatus = pb.RUN_STATUS_RUNNING, outcome: Outcome = NO_OUTCOME
) -> RunRecordV1:
    return RunRecordV1(
        run_id="r1",
        request_id="q1",
        owner_id="owner-a",
        request=run_request("r1"),
        status=status,
        created_at=written,
        updated_at=written,
        outcome=outcome,
    )


def run_record(
    written: datetime,
    lease: Lease | None = None,
    status: RunStatus = "running",
    outcome: dict[str, object] | None = None,
) -> RunRecord:
    return RunRecord(
        run_id="r1", version=3, status=status, attempt=1, fencing_token=1,
        created_at=written, updated_at=written, lease=lease, outcome=outcome,
    )  # fmt: skip


def test_a_lease_given_up_just_now_is_not_yet_interrupted() -> None:
    long_ago = NOW - timedelta(seconds=60)
    view = shown(
        registry_record(long_ago), run_record(NOW - timedelta(seconds=1)), now=NOW, ttl=TTL
    )
    assert view.status == pb.RUN_STATUS_RUNNING


def test_a_lease_given_up_a_ttl_ago_is_interrupted() -> None:
    given_up = NOW - timedelta(seconds=TTL + 1)
    view = shown(
        registry_record(NOW - timedelta(seconds=1)), run_record(given_up), now=NOW, ttl=TTL
    )
    assert view.status == pb.RUN_STATUS_INTERRUPTED


def test_a_run_without_a_run_record_counts_from_the_registry() -> None:
    assert shown(registry_record(NOW), None, now=NOW, ttl=TTL).status == pb.RUN_STATUS_RUNNING
    old = registry_record(NOW - timedelta(seconds=TTL + 1))
    assert shown(old, None, now=NOW, ttl=TTL).status == pb.RUN_STATUS_INTERRUPTED


def test_a_held_lease_shows_the_record_and_a_lapsed_one_interrupts() -> None:
    long_ago = NOW - timedelta(seconds=60)
    live = Lease("owner-a", long_ago, NOW + timedelta(seconds=3))
    lapsed = Lease("owner-a", long_ago, NOW - timedelta(seconds=1))
    record = registry_record(long_ago)
    assert (
        shown(record, run_record(long_ago, live), now=NOW, ttl=TTL).status == pb.RUN_STATUS_RUNNING
    )
    view = shown(record, run_record(long_ago, lapsed), now=NOW, ttl=TTL)
    assert view.status == pb.RUN_STATUS_INTERRUPTED


def test_the_run_record_decides_whatever_the_registry_last_wrote() -> None:
    """D16: a registry that says a run ended while its run record was taken again (a restore
    elsewhere claimed it and has not written the registry yet) shows the run record's view."""
    long_ago = NOW - timedelta(seconds=60)
    suspended = registry_record(long_ago, pb.RUN_STATUS_SUSPENDED, Outcome(code="suspended"))
    live = Lease("owner-b", NOW, NOW + timedelta(seconds=3))
    view = shown(suspended, run_record(NOW, live), now=NOW, ttl=TTL)
    assert (view.status, view.outcome) == (pb.RUN_STATUS_RUNNING, Outcome())
    lapsed = Lease("owner-b", long_ago, NOW - timedelta(seconds=1))
    view = shown(suspended, run_record(long_ago, lapsed), now=NOW, ttl=TTL)
    assert view.status == pb.RUN_STATUS_INTERRUPTED


def test_a_settled_run_record_names_its_status_and_outcome() -> None:
    running = registry_record(NOW)
    failed = run_record(NOW, status="failed", outcome={"code": "error", "message": "boom"})
    view = shown(running, failed, now=NOW, ttl=TTL)
    assert (view.status, view.outcome) == (
        pb.RUN_STATUS_FAILED,
        Outcome(code="error", message="boom"),
    )
    # Where both agree, the registry's outcome stays (it names the host calls that timed out).
    told = Outcome(code="error", message="boom; host call c1 timed out")
    same = registry_record(NOW, pb.RUN_STATUS_FAILED, told)
    assert shown(same, failed, now=NOW, ttl=TTL).outcome == told


def test_an_ended_run_without_a_run_record_is_as_the_registry_says() -> None:
    done = registry_record(NOW - timedelta(seconds=60), pb.RUN_STATUS_COMPLETED)
    assert shown(done, None, now=NOW, ttl=TTL) is done

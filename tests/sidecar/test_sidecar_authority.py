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

from oma_actors.runs import Lease, RunRecord
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.authority import shown
from sidecar.record import RunRecordV1

NOW = datetime(2026, 12, 4, 21, 0, tzinfo=UTC)
TTL = 6.0


def registry_record(written: datetime) -> RunRecordV1:
    return RunRecordV1(
        run_id="r1",
        request_id="q1",
        owner_id="owner-a",
        request=run_request("r1"),
        status=pb.RUN_STATUS_RUNNING,
        created_at=written,
        updated_at=written,
    )


def run_record(written: datetime, lease: Lease | None = None) -> RunRecord:
    return RunRecord(
        run_id="r1", version=3, status="running", attempt=1, fencing_token=1,
        created_at=written, updated_at=written, lease=lease,
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

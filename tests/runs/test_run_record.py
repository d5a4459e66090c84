"""RS-01 (the record and its JSON) and RS-02 (the lifecycle), without a store."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from run_helpers import START, code_of_call, record

from oma_actors.errors import LeaseError
from oma_actors.runs import RUN_STATUSES, Lease, RunRecord, can_transition, is_terminal, lease_live
from oma_actors.runs.lifecycle import check_transition

NEW = (
    '{"schema":1,"runId":"run-1","version":1,"status":"running","attempt":1,"fencingToken":1,'
    '"lease":{"owner":"worker-a","acquiredAt":"2026-09-01T00:00:00.000Z",'
    '"expiresAt":"2026-09-01T00:00:00.000Z"},"createdAt":"2026-09-01T00:00:00.000Z",'
    '"updatedAt":"2026-09-01T00:00:00.000Z"}'
)


# --- RS-01: the shape and OMA's JSON ------------------------------------------------------


def test_a_new_record_is_written_as_oma_writes_it() -> None:
    assert record().to_json() == NEW
    assert RunRecord.schema == 1


def test_timestamps_are_utc_with_milliseconds_and_truncated_like_date() -> None:
    local = timezone(timedelta(hours=2))
    moment = datetime(2026, 9, 1, 2, 0, 0, 123987, tzinfo=local)
    written = record(created_at=moment, updated_at=moment, lease=None).to_dict()
    assert written["createdAt"] == "2026-09-01T00:00:00.123Z"
    assert record(created_at=moment).created_at == datetime(2026, 9, 1, 0, 0, 0, 123000, tzinfo=UTC)


def test_absent_optional_fields_are_left_out_not_null() -> None:
    written = record(lease=None).to_dict()
    assert list(written) == [
        "schema", "runId", "version", "status", "attempt", "fencingToken", "createdAt", "updatedAt",
    ]  # fmt: skip


def test_a_key_that_appears_goes_last_and_an_existing_key_keeps_its_place() -> None:
    # OMA spreads the old record into the new one: the JSON must follow the same order.
    released = replace(record(), lease=None, version=2)
    taken = replace(released, lease=Lease("worker-b", START, START), version=3)
    assert list(taken.to_dict())[-1] == "lease"
    ref = {"key": "k", "snapshotVersion": 4, "savedAt": "2026-09-01T00:00:00.000Z"}
    pointed = replace(record(), checkpoint_ref=ref, lease=Lease("worker-a", START, START))
    assert list(pointed.to_dict())[-3:] == ["createdAt", "updatedAt", "checkpointRef"]
    assert list(pointed.to_dict()).index("lease") == 6


def test_the_record_keeps_its_own_copies_of_nested_objects() -> None:
    ref = {"key": "k", "snapshotVersion": 4, "savedAt": "2026-09-01T00:00:00.000Z"}
    kept = record(checkpoint_ref=ref)
    ref["key"] = "changed"
    assert kept.checkpoint_ref is not None
    assert kept.checkpoint_ref["key"] == "k"


SAVED = "2026-09-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"run_id": " "}, "runId"),
        ({"version": 0}, "version"),
        ({"version": True}, "version"),
        ({"attempt": 0}, "attempt"),
        ({"fencing_token": -1}, "fencingToken"),
        ({"status": "paused"}, "status"),
        ({"created_at": datetime(2026, 9, 1)}, "createdAt"),
        ({"lease": {"owner": "a"}}, "lease must be a Lease, got dict"),
        ({"checkpoint_ref": {"key": "k", "snapshotVersion": 1}}, "checkpointRef.savedAt"),
        ({"checkpoint_ref": {"key": "k", "snapshotVersion": 1.5, "savedAt": "x"}}, "snapshotVersion"),
        ({"outcome": {"code": "ok", "extra": 1}}, "outcome.extra"),
        ({"outcome": {"message": "m"}}, "outcome.code"),
        ({"suspension": {"suspendedAt": "2026-09-01T00:00:00.000Z", "pendingApprovalIds": [1]}},
         "pendingApprovalIds[0]"),
        # Each nested object's own rule (OMA's shapes, spec RS-01), named:
        ({"checkpoint_ref": "k"}, "checkpointRef must be an object"),
        ({"checkpoint_ref": {"key": 1, "snapshotVersion": 1, "savedAt": SAVED}},
         "checkpointRef.key must be a string"),
        ({"checkpoint_ref": {"key": "k", "snapshotVersion": 1, "savedAt": "2026-09-01"}},
         "checkpointRef.savedAt"),
        ({"outcome": "ok"}, "outcome must be an object"),
        ({"outcome": {"code": 1}}, "outcome.code must be a string"),
        ({"outcome": {"code": "error", "message": 2}}, "outcome.message must be a string"),
        ({"suspension": {"suspendedAt": SAVED}}, "suspension.pendingApprovalIds is missing"),
        ({"suspension": {"suspendedAt": "2026-09-01T00:00:00.000+00:00", "pendingApprovalIds": []}},
         "suspension.suspendedAt"),
        ({"suspension": {"suspendedAt": SAVED, "pendingApprovalIds": "apr_a"}},
         "pendingApprovalIds must be a list"),
    ],
)  # fmt: skip
def test_an_invalid_record_cannot_be_built(changes: dict[str, object], field: str) -> None:
    with pytest.raises(LeaseError) as caught:
        record(**changes)
    assert caught.value.code == "RUN_VALIDATION_ERROR"
    assert field in str(caught.value)


def test_a_lease_needs_an_owner_and_aware_times() -> None:
    assert code_of_call(Lease, " ", START, START) == "RUN_VALIDATION_ERROR"
    naive = datetime(2026, 9, 1)
    assert code_of_call(Lease, "a", START, naive) == "RUN_VALIDATION_ERROR"


def test_a_lease_is_live_strictly_before_it_expires() -> None:
    leased = record(lease=Lease("a", START, START + timedelta(seconds=10)))
    assert lease_live(leased, START + timedelta(seconds=9.999))
    assert not lease_live(leased, START + timedelta(seconds=10))
    assert not lease_live(record(lease=None), START)


# --- RS-01: reading is strict -------------------------------------------------------------


def test_parse_reads_back_what_was_written() -> None:
    assert RunRecord.parse(NEW) == record()
    assert RunRecord.parse(NEW).to_json() == NEW


def _edited(**changes: object) -> str:
    raw = json.loads(NEW)
    raw.update(changes)
    return json.dumps({k: v for k, v in raw.items() if v is not ...}, separators=(",", ":"))


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        (_edited(schema=2), "schema"),
        (_edited(schema=True), "schema"),
        (_edited(extra=1), "extra is not a field"),
        (_edited(attempt=...), "attempt is missing"),
        (_edited(version=1.0), "version"),
        (_edited(status="paused"), "status"),
        (_edited(updatedAt="yesterday"), "updatedAt"),
        (_edited(createdAt="yesterday"), "createdAt must be"),
        (_edited(createdAt="yesterday"), "got 'yesterday'"),  # the stored value, named
        (_edited(updatedAt="2026-09-01T00:00:00Z"), "updatedAt"),
        (_edited(updatedAt="2026-02-30T00:00:00.000Z"), "updatedAt"),
        # Dates Python's parser reads but that are not Date.toISOString's exact form:
        (_edited(updatedAt="2026-09-01T00:00:00.5Z"), "updatedAt"),
        (_edited(updatedAt="2026-09-01T00:00:00.000500Z"), "updatedAt"),
        (_edited(updatedAt="2026-09-01T00:00:00.000+00:00"), "updatedAt"),
        (_edited(updatedAt=1788220800000), "updatedAt"),
        (_edited(lease=None), "lease must be an object"),
        (_edited(lease={"owner": "", "acquiredAt": "", "expiresAt": ""}), "lease.owner"),
        (_edited(lease={"owner": "a", "acquiredAt": "2026-09-01T00:00:00.000Z", "expiresAt": ""}),
         "lease.expiresAt"),
        (_edited(lease={"owner": "a", "acquiredAt": "2026-09-01T00:00:00.000Z",
                        "expiresAt": "2026-09-01T00:00:00.000Z", "holder": "b"}),
         "lease.holder is not a field of a lease"),
        (_edited(outcome="ok"), "outcome must be an object"),
        (_edited(checkpointRef=None), "checkpointRef must be an object"),  # OMA omits, never null
        (_edited(lease={"owner": "a", "acquiredAt": "2026-09-01T00:00:00.000Z",
                        "expiresAt": "soon"}), "got 'soon'"),
        (NEW.replace('"version":1,', '"version":1,"version":2,'), "duplicate key"),
        (NEW.replace('"version":1', '"version":NaN'), "not valid JSON"),
    ],
)  # fmt: skip
def test_a_corrupt_record_is_an_integrity_error_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(LeaseError) as caught:
        RunRecord.parse(text)
    assert caught.value.code == "RUN_INTEGRITY_ERROR"
    assert field in str(caught.value)


def test_a_record_of_another_run_than_its_key_is_refused() -> None:
    assert code_of_call(RunRecord.parse, NEW, run_id="run-2") == "RUN_INTEGRITY_ERROR"


def test_non_ascii_and_escapes_are_written_as_json_stringify_writes_them() -> None:
    odd = record(run_id="run-ü-✓", outcome={"code": "x", "message": 'a\n"b"\x01\u2028\ud800'})
    text = odd.to_json()
    assert '"runId":"run-ü-✓"' in text
    assert '"message":"a\\n\\"b\\"\\u0001\u2028\\ud800"' in text
    assert RunRecord.parse(text) == odd


# --- RS-02: the lifecycle -----------------------------------------------------------------


LEGAL = {
    ("queued", "running"), ("queued", "cancelled"), ("queued", "failed"),
    ("running", "queued"), ("running", "suspended"), ("running", "completed"),
    ("running", "failed"), ("running", "cancelled"),
    ("suspended", "queued"), ("suspended", "running"), ("suspended", "cancelled"),
    ("suspended", "failed"),
}  # fmt: skip


def test_exactly_the_legal_transitions_are_allowed() -> None:
    allowed = {(a, b) for a in RUN_STATUSES for b in RUN_STATUSES if can_transition(a, b)}
    assert allowed == LEGAL


def test_terminal_statuses_are_final_and_named_so() -> None:
    assert {s for s in RUN_STATUSES if is_terminal(s)} == {"completed", "failed", "cancelled"}
    assert code_of_call(check_transition, "r", "completed", "running") == "RUN_ALREADY_TERMINAL"
    assert code_of_call(check_transition, "r", "queued", "suspended") == "RUN_INVALID_TRANSITION"
    assert code_of_call(check_transition, "r", "running", "running") == "RUN_INVALID_TRANSITION"
    check_transition("r", "suspended", "running")

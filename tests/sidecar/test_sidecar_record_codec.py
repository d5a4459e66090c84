"""The run record's storage format: schema 3 JSON, and the formats before it still read."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sidecar_helpers import legacy_record_text, run_request

from oma_actors.approvals import ApprovalDecision, Reviewer
from oma_actors.approvals.canonical import hash_approval_edit
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.record import AttemptResult, Outcome, RunRecordV1, TaskRow
from sidecar.record_codec import RecordFormatError, decode, encode

MOMENT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


DECISIONS = (
    ApprovalDecision(
        request_id="apr_" + "1" * 32,
        run_id="codec-1",
        scope="tool_call",
        request_hash="a" * 64,
        decision="approved",
        reviewer=Reviewer("ann", "Ann"),
        decided_at=MOMENT,
        edited_input={"text": "y"},
    ),
    ApprovalDecision(
        request_id="apr_" + "2" * 32,
        run_id="codec-1",
        scope="plan",
        request_hash="b" * 64,
        decision="rejected",
        reviewer=Reviewer("bob"),
        decided_at=MOMENT,
    ),
)


def full_record() -> RunRecordV1:
    request = run_request("codec-1", tools=("echo",), arguments={"text": "x"})
    request.metadata.update({"team": "blue", "n": 3})
    request.team.agents[0].scripted.delay.FromMilliseconds(1500)
    return RunRecordV1(
        run_id="codec-1",
        request_id=request.request_id,
        request=request,
        attempt=2,
        forked=True,
        created_at=MOMENT,
        updated_at=MOMENT,
        outcome=Outcome(code="suspended", message="waiting for a reviewer"),
        tasks=(
            TaskRow(
                id="t1",
                title="Task t1",
                status=pb.TASK_STATUS_COMPLETED,
                assignee="worker",
                result="done",
            ),
            TaskRow(id="t2", title="Task t2", status=pb.TASK_STATUS_BLOCKED, depends_on=("t1",)),
        ),
        result=AttemptResult(
            success=False,
            outcome=Outcome(code="suspended"),
            synthesis="",
            input_tokens=12,
            output_tokens=34,
            approval_decisions=DECISIONS,
        ),
        store_uri="file:///tmp/state.json",
        seq_reserved_until=2048,
    )


def test_schema_3_round_trips_every_field() -> None:
    record = full_record()
    assert decode(encode(record)) == record


def test_schema_3_is_named_json_without_protobuf_bytes() -> None:
    document = json.loads(encode(full_record()))
    assert document["schema"] == 3
    assert "version" not in document
    assert "status" not in document  # the run record's (D16)
    assert "pending_approvals" not in document  # the run record's suspension (D16)
    assert [task["status"] for task in document["tasks"]] == ["completed", "blocked"]
    assert "owner_id" not in document  # the run record's lease holder (D16)
    assert document["forked"] is True
    assert "forked" not in json.loads(encode(replace(full_record(), forked=False)))
    assert document["result"]["input_tokens"] == 12
    # The spec is the request's canonical JSON: field names, not serialized bytes.
    assert document["spec"]["run_id"] == "codec-1"
    assert document["spec"]["team"]["agents"][0]["name"] == "worker"
    assert document["spec"]["metadata"] == {"team": "blue", "n": 3}


def test_a_results_approval_decisions_are_stored_in_the_ledger_s_own_form() -> None:
    [approved, rejected] = json.loads(encode(full_record()))["result"]["approval_decisions"]
    assert approved == {
        "version": 1,
        "requestId": "apr_" + "1" * 32,
        "runId": "codec-1",
        "scope": "tool_call",
        "requestHash": "a" * 64,
        "decision": "approved",
        "reviewer": {"id": "ann", "displayName": "Ann"},
        "decidedAt": "2026-01-02T03:04:05.000Z",
        "editedInput": {"text": "y"},
        "editHash": hash_approval_edit("a" * 64, {"text": "y"}),
    }
    assert (rejected["scope"], rejected["decision"], rejected["reviewer"]) == (
        "plan",
        "rejected",
        {"id": "bob"},
    )


def test_a_stored_decision_whose_edit_was_changed_is_refused() -> None:
    document = json.loads(encode(full_record()))
    document["result"]["approval_decisions"][0]["editedInput"] = {"text": "changed"}
    with pytest.raises(RecordFormatError, match="editedInput does not match its editHash"):
        decode(json.dumps(document))


@pytest.mark.parametrize("schema", [1, 2, 3])
def test_a_result_stored_before_approval_decisions_were_kept_reads_none(schema: int) -> None:
    written = full_record()
    document = json.loads(encode(written))
    del document["result"]["approval_decisions"]
    if schema < 3:
        document.update(schema=schema, owner_id="a", pending_approvals=[])
    record = decode(json.dumps(document))
    assert record.result is not None
    assert record.result.approval_decisions == ()
    assert record.result == replace(written.result, approval_decisions=())  # type: ignore[type-var]
    assert json.loads(encode(record))["result"]["approval_decisions"] == []


def test_a_result_in_the_format_before_schema_1_keeps_its_approval_decisions() -> None:
    decision = pb.ApprovalDecision(
        request_id="apr_" + "3" * 32,
        run_id="old-2",
        scope=pb.APPROVAL_SCOPE_TOOL_CALL,
        request_hash="c" * 64,
        decision=pb.APPROVAL_STATE_APPROVED,
        reviewer=pb.Reviewer(id="ann", display_name="Ann"),
        edited_input_json='{"text": "z"}',
    )
    decision.decided_at.FromDatetime(MOMENT)
    result = pb.RunResult(success=True, status=pb.Outcome(code="ok"), approval_decisions=[decision])
    record = decode(legacy_record_text(run_request("old-2"), result=result))
    assert record.result is not None
    assert record.result.approval_decisions == (
        ApprovalDecision(
            request_id="apr_" + "3" * 32,
            run_id="old-2",
            scope="tool_call",
            request_hash="c" * 64,
            decision="approved",
            reviewer=Reviewer("ann", "Ann"),
            decided_at=MOMENT,
            edited_input={"text": "z"},
        ),
    )
    assert decode(encode(record)) == record


def test_a_record_in_the_format_before_schema_1_is_read() -> None:
    request = run_request("old-1")
    tasks = (
        pb.TaskState(id="t1", title="Task t1", status=pb.TASK_STATUS_COMPLETED, result="r1"),
        pb.TaskState(id="t2", title="Task t2", status=pb.TASK_STATUS_PENDING, depends_on=["t1"]),
    )
    result = pb.RunResult(
        success=True,
        status=pb.Outcome(code="ok"),
        synthesis="all done",
        usage=pb.TokenUsage(input_tokens=5, output_tokens=6),
    )
    text = legacy_record_text(
        request,
        status="RUN_STATUS_COMPLETED",
        tasks=tasks,
        result=result,
        pending_approvals=("ap-9",),
        seq_reserved_until=3072,
    )
    record = decode(text)
    assert not record.forked
    assert record.run_id == "old-1"
    assert record.request == request
    assert record.legacy_status == pb.RUN_STATUS_COMPLETED
    assert [(t.id, t.status, t.result) for t in record.tasks] == [
        ("t1", pb.TASK_STATUS_COMPLETED, "r1"),
        ("t2", pb.TASK_STATUS_PENDING, ""),
    ]
    assert record.tasks[1].depends_on == ("t1",)
    assert record.result == AttemptResult(
        success=True, outcome=Outcome(code="ok"), synthesis="all done",
        input_tokens=5, output_tokens=6,
    )  # fmt: skip
    assert record.legacy_pending == ("ap-9",)
    assert record.seq_reserved_until == 3072
    # Written again, it is schema 3, and keeps the status and the approvals it had (while it
    # has no run record, they are all that says how the run ended: ``sidecar.authority``).
    again = json.loads(encode(record))
    assert (again["schema"], again["status"], again["pending_approvals"]) == (
        3,
        "completed",
        ["ap-9"],
    )
    assert decode(encode(record)) == record


@pytest.mark.parametrize(
    ("owner", "status", "forked"),
    [
        ("sidecar-a", None, False),
        ("", None, True),  # a forked run nobody started yet
        ("", "completed", False),  # a record from before owners, written again in schema 1
    ],
)
def test_a_schema_1_record_is_read_its_empty_owner_naming_a_forked_run(
    owner: str, status: str | None, forked: bool
) -> None:
    written = replace(full_record(), forked=False)
    document = json.loads(encode(written))
    document.update(schema=1, owner_id=owner, pending_approvals=[])
    if status is not None:
        document["status"] = status
    record = decode(json.dumps(document))
    assert record.forked is forked
    assert record == replace(written, forked=forked, legacy_status=record.legacy_status)
    again = json.loads(encode(record))
    assert again["schema"] == 3
    assert "owner_id" not in again


@pytest.mark.parametrize("schema", [1, 2])
def test_a_record_from_before_d16_keeps_its_stored_status_and_approvals(schema: int) -> None:
    document = json.loads(encode(full_record()))
    document.update(schema=schema, owner_id="a", status="suspended", pending_approvals=["ap-2"])
    record = decode(json.dumps(document))
    assert (record.legacy_status, record.legacy_pending) == (pb.RUN_STATUS_SUSPENDED, ("ap-2",))
    again = json.loads(encode(record))
    assert (again["status"], again["pending_approvals"]) == ("suspended", ["ap-2"])


def test_a_schema_2_record_since_d16_leaves_its_approvals_to_the_run_record() -> None:
    # What the last attempt waited for is its run record's suspension: not read twice.
    written = full_record()
    document = json.loads(encode(written))
    document.update(schema=2, pending_approvals=["ap-1"])
    record = decode(json.dumps(document))
    assert record == written
    assert "pending_approvals" not in json.loads(encode(record))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("not json", "malformed run record: JSONDecodeError"),
        # Not an object: named as such (``"schema"`` would pass an ``in`` test as a string).
        ("[]", "a run record is a JSON object"),
        ('"schema"', "a run record is a JSON object"),
        ("3", "a run record is a JSON object"),
        ('{"schema": 4}', "unknown run record schema 4"),
        ('{"version": 7}', "neither a schema nor a version"),
        ("{}", "neither a schema nor a version"),
        ('{"schema": 1, "run_id": "x"}', "malformed run record: KeyError"),
        ('{"schema": 2, "run_id": "x"}', "malformed run record: KeyError"),
        ('{"schema": 3, "run_id": "x"}', "malformed run record: KeyError"),
        ('{"version": 1, "run_id": "x", "request": "!!!"}', "malformed run record: KeyError"),
    ],
)
def test_unreadable_records_raise_a_format_error_naming_the_problem(text: str, named: str) -> None:
    with pytest.raises(RecordFormatError, match=re.escape(named)):
        decode(text)


def test_an_unknown_status_name_is_a_format_error() -> None:
    document = json.loads(encode(full_record()))
    document["status"] = "sleeping"
    with pytest.raises(RecordFormatError, match="sleeping"):
        decode(json.dumps(document))


def test_an_unknown_task_status_name_is_a_format_error() -> None:
    # Never a task without a status (the view would show it as nothing at all).
    document = json.loads(encode(full_record()))
    document["tasks"][1]["status"] = "snoozing"
    with pytest.raises(RecordFormatError, match="unknown task status 'snoozing'"):
        decode(json.dumps(document))

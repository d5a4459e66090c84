"""``build_timeline``: each tool call's mark, approvals, attempts and usage, from snapshot + journal."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from timeline_runs import restored_demo

from oma_actors import TaskState, TokenUsage
from oma_actors.approvals import ApprovalDecision, ApprovalRequest, Reviewer
from oma_actors.checkpoint import CheckpointSnapshot
from oma_actors.domain.inflight import PendingCall, RunnerState
from oma_actors.domain.snapshot import InFlightTask
from oma_actors.journal import JournalEvent
from oma_actors.llm import Message, TextBlock, ToolUseBlock
from oma_actors.timeline import build_timeline

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def snapshot(*, attempt: int = 2, **fields: Any) -> CheckpointSnapshot:
    task = TaskState(id="t1", title="Task one", description="d", status="in_progress", assignee="a")
    return CheckpointSnapshot(
        version=4, mode="runTasks", run_id="r", attempt=attempt, revision=7, created_at="",
        tasks=(task,), **fields,
    )  # fmt: skip


def ev(seq: int, attempt: int, kind: str, **data: Any) -> JournalEvent:
    return JournalEvent(seq=seq, type=kind, run_id="r", attempt=attempt, timestamp_unix_ms=0,
                        task_id="t1", agent_name="a", data=data)  # fmt: skip


def assistant(seq: int, attempt: int, *ids: str, text: str = "") -> JournalEvent:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": "tool", "input": {}} for i in ids]
    return ev(seq, attempt, "assistant/message", message={"role": "assistant", "content": content},
              usage={"input_tokens": 3, "output_tokens": 2})  # fmt: skip


def call(seq: int, attempt: int, call_id: str) -> JournalEvent:
    return ev(seq, attempt, "tool/call", call={"type": "tool_use", "id": call_id, "name": "tool"})


def result(
    seq: int, attempt: int, call_id: str, text: str = "ok", *, error: bool = False
) -> JournalEvent:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}
    return ev(seq, attempt, "tool/result", toolCallId=call_id, result=block)


def closed(seq: int, attempt: int) -> JournalEvent:
    return ev(seq, attempt, "user/message", origin="tool_results")


def marks(events: list[JournalEvent], **fields: Any) -> dict[str, tuple[str, int | None]]:
    timeline = build_timeline(snapshot(**fields), events)
    return {c.call_id: (c.mark, c.attempt) for c in timeline.calls}


def test_a_call_committed_and_closed_in_its_attempt_is_executed() -> None:
    events = [assistant(1, 1, "c1"), call(2, 1, "c1"), result(3, 1, "c1"), closed(4, 1)]
    assert marks(events, attempt=1) == {"c1": ("executed", 1)}


def test_committed_before_the_crash_is_replayed_uncommitted_re_ran() -> None:
    events = [
        assistant(1, 1, "c1", "c2"), call(2, 1, "c1"), call(3, 1, "c2"), result(4, 1, "c1"),
        call(5, 2, "c2"), result(5, 2, "c2"), closed(6, 2), assistant(7, 2, text="done"),
    ]  # fmt: skip
    assert marks(events) == {"c1": ("replayed", 2), "c2": ("re-ran", 2)}
    lane = build_timeline(snapshot(), events).lanes[0]
    assert lane.attempts == (1, 2)
    assert [t.attempt for t in lane.turns] == [1, 2]
    assert (lane.input_tokens, lane.output_tokens) == (6, 4)  # no snapshot usage: the journal's


def test_a_committed_call_whose_result_the_journal_lost_is_replayed() -> None:
    events = [assistant(1, 1, "c1"), call(2, 1, "c1"), closed(3, 2), assistant(4, 2, text="ok")]
    assert marks(events) == {"c1": ("replayed", 2)}


def test_a_started_unsafe_call_resolved_as_unknown_is_outcome_unknown() -> None:
    unknown = "TOOL_OUTCOME_UNKNOWN: the tool may have run"
    events = [
        assistant(1, 1, "c1"), call(2, 1, "c1"), result(3, 2, "c1", unknown, error=True),
        closed(4, 2),
    ]  # fmt: skip
    assert marks(events) == {"c1": ("outcome unknown", 2)}


def test_other_runs_events_are_ignored() -> None:
    stray = JournalEvent(seq=9, type="assistant/message", run_id="other", attempt=1,
                         timestamp_unix_ms=0, task_id="t1", data={})  # fmt: skip
    timeline = build_timeline(snapshot(), [stray])
    assert timeline.lanes[0].turns == ()


def in_flight_snapshot(*, decided: bool) -> CheckpointSnapshot:
    uses = [ToolUseBlock(i, "tool", {}) for i in ("c1", "c2", "c3")]
    request = ApprovalRequest(
        id="apr_1", run_id="r", scope="tool_call", boundary="b", request_hash="h",
        requested_at=WHEN, reason="needs review", content={"taskId": "t1", "toolCallId": "c2"},
    )  # fmt: skip
    decision = ApprovalDecision(
        request_id="apr_1", run_id="r", scope="tool_call", request_hash="h",
        decision="approve", reviewer=Reviewer("alice@example.com"), decided_at=WHEN,
    )  # fmt: skip
    state = RunnerState(
        phase="executing_tools",
        conversation=(Message("user", [TextBlock("go")]), Message("assistant", list(uses))),
        messages=(Message("assistant", list(uses)),),
        turns=1,
        token_usage=TokenUsage(11, 5),
        pending=(PendingCall(call=uses[0], dispatched=True),
                 PendingCall(call=uses[1], approval_request=request),
                 PendingCall(call=uses[2])),
    )  # fmt: skip
    return snapshot(
        in_flight=(InFlightTask(task_id="t1", assignee="a", state=state),),
        pending_approvals=() if decided else (request,),
        approval_decisions=(decision,) if decided else (),
    )


def test_a_snapshot_without_journal_marks_dispatched_awaiting_and_pending_calls() -> None:
    timeline = build_timeline(in_flight_snapshot(decided=False))
    assert not timeline.from_journal
    assert {c.call_id: c.mark for c in timeline.calls} == {
        "c1": "outcome unknown", "c2": "awaiting approval", "c3": "pending",
    }  # fmt: skip
    assert timeline.calls[1].approval_id == "apr_1"
    [approval] = timeline.approvals
    assert (approval.decision, approval.task_id, approval.tool_call_id) == (None, "t1", "c2")
    assert timeline.status == "suspended"
    lane = timeline.lanes[0]
    assert (lane.input_tokens, lane.output_tokens, lane.attempts) == (11, 5, ())


def test_a_decided_approval_says_who_and_when() -> None:
    [approval] = build_timeline(in_flight_snapshot(decided=True)).approvals
    assert (approval.decision, approval.reviewer) == ("approve", "alice@example.com")
    assert approval.decided_at == "2026-01-02T03:04:05.000Z"  # as a person reads it (one form)


def demo_marks(snap: CheckpointSnapshot, events: list[JournalEvent] | None) -> dict[str, Any]:
    timeline = build_timeline(snap, events)
    lane = next(lane for lane in timeline.lanes if lane.title == "Analyse findings")
    return {
        "analyse": {c.call_id: c.mark for t in lane.turns for c in t.calls},
        "attempts": lane.attempts,
        "others": {c.mark for ln in timeline.lanes if ln is not lane for t in ln.turns
                   for c in t.calls},
    }  # fmt: skip


def test_the_restored_demo_run_marks_replayed_and_re_ran_calls(tmp_path: Path) -> None:
    snap, events = asyncio.run(restored_demo(tmp_path))
    expected = {"call-analyse-0-0": "replayed", "call-analyse-0-1": "re-ran"}
    seen = demo_marks(snap, events)
    assert seen == {"analyse": expected, "attempts": (1, 2), "others": {"executed"}}
    # A crash can take the interrupted attempt's last journal events with it (a restore may
    # also discard a tail): the snapshot's turns stand in for them, and the marks stay the same.
    [analyse] = [t.id for t in snap.tasks if t.title == "Analyse findings"]
    lost = [e for e in events if not (e.attempt == 1 and e.task_id == analyse)]
    assert demo_marks(snap, lost) == seen
    # Without a journal nothing tells a replay from a first run.
    bare = demo_marks(snap, None)
    assert bare["analyse"] == dict.fromkeys(expected, "executed")
    assert bare["attempts"] == ()


# --- marks from the journal's facts, never from result text (issue 24, item 6) --------------


def approval_request(seq: int, attempt: int, call_id: str) -> JournalEvent:
    request = {"id": f"apr-{call_id}", "content": {"taskId": "t1", "toolCallId": call_id}}
    return ev(seq, attempt, "approval/request", request=request)


def approval_decision(seq: int, attempt: int, call_id: str, verdict: str) -> JournalEvent:
    # Run-scoped in the journal: no task id.
    decision = {"requestId": f"apr-{call_id}", "decision": verdict, "reviewer": {"id": "rev"}}
    return JournalEvent(seq=seq, type="approval/decision", run_id="r", attempt=attempt,
                        timestamp_unix_ms=0, data={"decision": decision})  # fmt: skip


def test_an_unsafe_call_settled_by_reconcile_did_not_re_run() -> None:
    # Started in attempt 1 (its durable dispatch), committed by attempt 2 without a start of
    # its own: the restore's reconcile reported what happened; nothing ran again.
    events = [assistant(1, 1, "c1"), call(2, 1, "c1"), result(3, 2, "c1", "charged: ok"),
              closed(4, 2)]  # fmt: skip
    assert marks(events) == {"c1": ("settled", 2)}


def test_a_result_quoting_the_unknown_code_is_not_outcome_unknown() -> None:
    quoted = "the log says TOOL_OUTCOME_UNKNOWN somewhere"
    events = [assistant(1, 1, "c1"), call(2, 1, "c1"), result(3, 1, "c1", quoted), closed(4, 1)]
    assert marks(events) == {"c1": ("executed", 1)}


def test_a_call_that_ran_once_after_its_approval_is_executed_not_re_ran() -> None:
    events = [
        assistant(1, 1, "c1"), approval_request(2, 1, "c1"),
        approval_decision(3, 2, "c1", "approved"), call(4, 2, "c1"), result(5, 2, "c1"),
        closed(6, 2),
    ]  # fmt: skip
    assert marks(events) == {"c1": ("executed", 2)}


def test_a_call_rejected_by_approval_is_rejected_and_never_ran() -> None:
    refusal = 'Tool "tool" denied by durable approval.'
    events = [
        assistant(1, 1, "c1"), approval_request(2, 1, "c1"),
        approval_decision(3, 2, "c1", "rejected"), call(4, 2, "c1"),
        result(5, 2, "c1", refusal, error=True), closed(6, 2),
    ]  # fmt: skip
    assert marks(events) == {"c1": ("rejected", 2)}


def test_an_approval_marks_only_its_own_task_s_call_when_call_ids_repeat() -> None:
    # A call id is unique within one conversation only: t2's model named its call c1 too. The
    # rejection of t1's c1 says nothing of t2's, which ran.
    def of_t2(event: JournalEvent) -> JournalEvent:
        return replace(event, task_id="t2", agent_name="b")

    refusal = 'Tool "tool" denied by durable approval.'
    events = [
        assistant(1, 1, "c1"), of_t2(assistant(2, 1, "c1")), approval_request(3, 1, "c1"),
        of_t2(call(4, 1, "c1")), of_t2(result(5, 1, "c1")), of_t2(closed(6, 1)),
        approval_decision(7, 2, "c1", "rejected"), call(8, 2, "c1"),
        result(9, 2, "c1", refusal, error=True), closed(10, 2),
    ]  # fmt: skip
    two = TaskState(id="t2", title="Task two", description="d", status="in_progress", assignee="b")
    timeline = build_timeline(replace(snapshot(), tasks=(*snapshot().tasks, two)), events)
    lanes = {lane.task_id: [c.mark for t in lane.turns for c in t.calls] for lane in timeline.lanes}
    assert lanes == {"t1": ["rejected"], "t2": ["executed"]}


def test_a_started_call_waiting_for_its_host_is_running_not_outcome_unknown() -> None:
    # A consequential host call: dispatched in the run's current attempt, no result yet.
    use = ToolUseBlock("c1", "tool", {})
    state = RunnerState(
        phase="executing_tools",
        conversation=(Message("user", [TextBlock("go")]), Message("assistant", [use])),
        messages=(Message("assistant", [use]),), turns=1, token_usage=TokenUsage(1, 1),
        pending=(PendingCall(call=use, dispatched=True),),
    )  # fmt: skip
    flight = (InFlightTask(task_id="t1", assignee="a", state=state),)
    events = [assistant(1, 2, "c1"), call(2, 2, "c1")]
    assert marks(events, in_flight=flight) == {"c1": ("running", 2)}
    # The same start in an attempt that has ended (the run is in attempt 3 now): unknown.
    assert marks(events, in_flight=flight, attempt=3) == {"c1": ("outcome unknown", 2)}

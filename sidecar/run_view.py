"""Pure conversions between run records and the wire: ``pb.Run``, ``pb.TaskState``, results.

The record (``sidecar.record``) is the sidecar's own value; these functions are the only place
it meets the wire messages, in both directions.
"""

from __future__ import annotations

import json
from datetime import UTC
from typing import TYPE_CHECKING, Any

from oma_actors.approvals import ApprovalDecision, Reviewer
from oma_actors.keyspace import checkpoint_key
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.convert import MODE_OF, TASK_STATUS, task_counts, timestamp
from sidecar.events import SCOPES
from sidecar.record import AttemptResult, Outcome, TaskRow
from sidecar.stores import shown_uri

if TYPE_CHECKING:
    from oma_actors import TaskState, TeamRunResult
    from sidecar.record import RunView

DECISIONS = {"approved": pb.APPROVAL_STATE_APPROVED, "rejected": pb.APPROVAL_STATE_REJECTED}
"""OMA's decision values on the wire."""
# Values: OMA's scope and decision names (the core's literal types are not public API).
_SCOPE_NAME: dict[int, Any] = {value: name for name, value in SCOPES.items()}
_DECISION_NAME: dict[int, Any] = {value: name for name, value in DECISIONS.items()}


def initial_tasks(request: pb.StartRunRequest) -> tuple[TaskRow, ...]:
    """The tasks a run starts with, as far as the request tells (none for a goal)."""
    mode = request.WhichOneof("mode")
    specs = request.tasks.tasks if mode == "tasks" else request.plan.tasks if mode else []
    return tuple(
        TaskRow(
            id=spec.id,
            title=spec.title,
            status=pb.TASK_STATUS_PENDING,
            assignee=spec.assignee,
            depends_on=tuple(spec.depends_on),
        )
        for spec in specs
        if spec.id
    )


def task_row_of(task: pb.TaskState) -> TaskRow:
    """The record's row of a wire task state."""
    return TaskRow(
        id=task.id,
        title=task.title,
        status=task.status,
        assignee=task.assignee,
        depends_on=tuple(task.depends_on),
        result=task.result,
    )


def task_row_from_state(task: TaskState) -> TaskRow:
    """The record's row of an OMA task state (a finished attempt's tasks)."""
    return TaskRow(
        id=task.id,
        title=task.title,
        status=TASK_STATUS.get(task.status, pb.TASK_STATUS_UNSPECIFIED),
        assignee=task.assignee or "",
        depends_on=tuple(task.depends_on),
        result=task.result or "",
    )


def task_state_pb(row: TaskRow) -> pb.TaskState:
    """The wire form of a task row."""
    return pb.TaskState(
        id=row.id,
        title=row.title,
        status=row.status,
        assignee=row.assignee,
        depends_on=list(row.depends_on),
        result=row.result,
    )


def attempt_result_of(result: pb.RunResult) -> AttemptResult:
    """The record's form of a wire run result."""
    return AttemptResult(
        success=result.success,
        outcome=Outcome(code=result.status.code, message=result.status.message),
        synthesis=result.synthesis,
        input_tokens=result.usage.input_tokens,
        output_tokens=result.usage.output_tokens,
        plan_only=result.plan_only,
        approval_decisions=tuple(decision_of(item) for item in result.approval_decisions),
    )


def attempt_result_from(result: TeamRunResult) -> AttemptResult:
    """The record's form of a finished attempt's ``TeamRunResult``."""
    coordinator = result.agent_results.get("coordinator")
    return AttemptResult(
        success=result.success,
        outcome=Outcome(code=result.status.code, message=result.status.message or ""),
        synthesis=coordinator.output if coordinator is not None else "",
        input_tokens=result.token_usage.input_tokens,
        output_tokens=result.token_usage.output_tokens,
        plan_only=result.plan_only,
        approval_decisions=tuple(result.approval_decisions),
    )


def run_result_pb(result: AttemptResult) -> pb.RunResult:
    """The wire form of an attempt's result."""
    return pb.RunResult(
        success=result.success,
        status=outcome_pb(result.outcome),
        synthesis=result.synthesis,
        usage=pb.TokenUsage(input_tokens=result.input_tokens, output_tokens=result.output_tokens),
        approval_decisions=[decision_pb(decision) for decision in result.approval_decisions],
        plan_only=result.plan_only,
    )


def decision_pb(decision: ApprovalDecision) -> pb.ApprovalDecision:
    """The wire form of an approval decision (``GetApproval``'s and a run result's)."""
    return pb.ApprovalDecision(
        request_id=decision.request_id,
        run_id=decision.run_id,
        scope=SCOPES[decision.scope],
        request_hash=decision.request_hash,
        decision=DECISIONS[decision.decision],
        reviewer=pb.Reviewer(
            id=decision.reviewer.id, display_name=decision.reviewer.display_name or ""
        ),
        decided_at=timestamp(decision.decided_at),
        edited_input_json=""
        if decision.edited_input is None
        else json.dumps(decision.edited_input, sort_keys=True),
    )


def decision_of(decision: pb.ApprovalDecision) -> ApprovalDecision:
    """The approval decision a wire one carries (a result stored in the format before schema 1).

    Raises:
        KeyError: an unspecified scope or decision; ValueError: an edit that is no JSON.
    """
    edited = decision.edited_input_json
    return ApprovalDecision(
        request_id=decision.request_id,
        run_id=decision.run_id,
        scope=_SCOPE_NAME[decision.scope],
        request_hash=decision.request_hash,
        decision=_DECISION_NAME[decision.decision],
        reviewer=Reviewer(decision.reviewer.id, decision.reviewer.display_name or None),
        decided_at=decision.decided_at.ToDatetime(tzinfo=UTC),
        edited_input=json.loads(edited) if edited else None,
    )


def outcome_pb(outcome: Outcome) -> pb.Outcome:
    """The wire form of an outcome."""
    return pb.Outcome(code=outcome.code, message=outcome.message)


def run_message(view: RunView, *, last_seq: int, full: bool) -> pb.Run:
    """The wire form of a run.

    Args:
        view: the run (``sidecar.authority``).
        last_seq: the seq of the run's newest event.
        full: add the tasks and the result (``RUN_VIEW_FULL``).
    """
    record = view.record
    request = record.request
    checkpoint = request.checkpoint
    states = [task_state_pb(row) for row in view.tasks]
    message = pb.Run(
        run_id=record.run_id,
        mode=MODE_OF.get(request.WhichOneof("mode") or "", pb.RUN_MODE_UNSPECIFIED),
        status=view.status,
        attempt=record.attempt,
        request_id=record.request_id,
        created_at=timestamp(record.created_at),
        updated_at=timestamp(view.updated_at),
        outcome=outcome_pb(view.outcome),
        task_counts=task_counts(states),
        pending_approval_ids=list(view.pending_approvals),
        last_event_seq=last_seq,
        checkpoint=pb.CheckpointRef(
            enabled=not checkpoint.disabled,
            store_uri=shown_uri(record.store_uri),  # a postgresql:// password stays here
            key=checkpoint.key or checkpoint_key(record.run_id),
        ),
    )
    if request.HasField("metadata"):
        message.metadata.CopyFrom(request.metadata)
    if full:
        message.tasks.extend(states)
        if record.result is not None:
            message.result.CopyFrom(run_result_pb(record.result))
    return message

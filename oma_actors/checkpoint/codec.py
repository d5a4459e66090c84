"""OMA-compatible JSON for snapshots: write schema v4 (plus ``revision``), read v1..v5.

A run with a journal writes v5 instead (v4 plus the journal members, spec JR-10; see
``journal_fields``).

``decode`` is identity-bound: an unknown schema raises ``UnsupportedSchemaError``, a value that
fails the validator raises ``CheckpointError``, and neither is ever read as "no checkpoint".
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors.approvals import (
    decision_from_json,
    decision_to_json,
    request_from_json,
    request_to_json,
)
from oma_actors.checkpoint.carry import carry_snapshot
from oma_actors.checkpoint.fragments import EncodeCache, EncodedText, Fragments
from oma_actors.checkpoint.once import (
    rebuilds_records,
    records_once,
    restore_entry,
    restore_records,
    write_entry_once,
    writes_once,
    written_once,
)
from oma_actors.checkpoint.validate import problem
from oma_actors.domain.jsonforms import (
    plan_revision_to_json,
    queue_plan_from_json,
    result_from_json,
    result_to_json,
    runner_from_json,
    runner_to_json,
    task_from_json,
    task_to_json,
    usage_from_json,
    usage_to_json,
)
from oma_actors.domain.snapshot import (
    READ_VERSIONS,
    CheckpointSnapshot,
    CompletedTask,
    ForkedFrom,
    InFlightTask,
    RunIdentity,
)
from oma_actors.errors import (
    CheckpointError,
    DurableApprovalError,
    UnsupportedSchemaError,
    sealed_note,
)
from oma_actors.gc_pause import gc_paused
from oma_actors.journal.fields import add_journal_members, write_version
from oma_actors.jsontext import compact_dumps, loads, reject_constant

if TYPE_CHECKING:
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.stores.base import JsonText

_PARTITIONS = (
    ("pending", "pending"),
    ("inProgress", "in_progress"),
    ("completed", "completed"),
    ("failed", "failed"),
    ("blocked", "blocked"),
    ("skipped", "skipped"),
)


def to_json_object(
    snapshot: CheckpointSnapshot, fragments: Fragments | None = None
) -> dict[str, Any]:
    """The v4 (or, with a journal, v5) JSON object of ``snapshot`` (field order as OMA's).

    With ``fragments``, the long lists of in-flight entries are placeholders whose text the
    collector holds; ``encode`` splices them in.
    """
    identity = snapshot.identity
    out: dict[str, Any] = {
        "version": write_version(snapshot),
        "mode": snapshot.mode,
        "createdAt": snapshot.created_at,
        "revision": snapshot.revision,
    }
    if snapshot.metadata is not None:
        out["metadata"] = snapshot.metadata
    # v4 requires an identity; a snapshot read from v1 has none, so it gets one with empty
    # trace ids (there is no previous trace to link to, spec CK-07).
    out["identity"] = {
        "runId": identity.run_id if identity else snapshot.run_id,
        "attempt": identity.attempt if identity else snapshot.attempt,
        "lastTraceId": identity.trace_id if identity else "",
        "lastRootSpanId": identity.root_span_id if identity else "",
    }
    if snapshot.goal is not None:
        out["goal"] = snapshot.goal
    out["queue"] = _queue_to_json(snapshot)
    if snapshot.shared_memory is not None:
        out["sharedMemory"] = snapshot.shared_memory
    # We have no message bus of our own: a restored run keeps the bus it was restored with.
    source_bus = (snapshot.source or {}).get("messageBus")
    out["messageBus"] = (
        snapshot.message_bus or source_bus or {"version": 1, "messages": [], "readState": []}
    )
    if snapshot.turn_count is not None:
        out["turnCount"] = snapshot.turn_count
    # Journal-first, each tool output is written once (``once``, issue 19); OMA's form otherwise.
    once = writes_once(snapshot)
    out["completedTaskResults"] = [_completed_to_json(item, once) for item in snapshot.completed]
    out["inFlightTasks"] = [
        _in_flight_to_json(item, fragments, once) for item in snapshot.in_flight
    ]
    out["pendingApprovals"] = [request_to_json(r) for r in snapshot.pending_approvals]
    out["approvalDecisions"] = [decision_to_json(d) for d in snapshot.approval_decisions]
    add_journal_members(out, snapshot)  # v5 only (JR-10): nothing for a run without a journal
    # Our fields; OMA ignores members it does not know.
    if snapshot.synthesis is not None:
        out["synthesisResult"] = result_to_json(snapshot.synthesis)
    if snapshot.planning_usage is not None:
        out["planningTokenUsage"] = usage_to_json(snapshot.planning_usage)
    if snapshot.announced is not None:
        out["announcedTaskIds"] = list(snapshot.announced)
    if snapshot.forked_from is not None:
        origin = snapshot.forked_from
        out["forkedFrom"] = {"runId": origin.run_id, "seq": origin.seq}
    carry_snapshot(out, snapshot.source)
    return out


def _queue_to_json(snapshot: CheckpointSnapshot) -> dict[str, Any]:
    """OMA's ``TaskQueueSnapshot``: v1, or v2 once the plan has a revision (spec TQ-11)."""
    plan = snapshot.plan
    queue: dict[str, Any] = {
        "version": 2 if plan.is_revised else 1,
        "tasks": [task_to_json(t) for t in snapshot.tasks],
    }
    for name, status in _PARTITIONS:
        queue[name] = [task.id for task in snapshot.tasks if task.status == status]
    if plan.is_revised:
        queue["planRevision"] = plan.revision
        queue["planRevisions"] = [plan_revision_to_json(r) for r in plan.revisions]
    return queue


def _in_flight_to_json(
    item: InFlightTask, fragments: Fragments | None, once: bool
) -> dict[str, Any]:
    if fragments is None:
        out = runner_to_json(item.task_id, item.assignee, item.state)
    else:
        out = runner_to_json(item.task_id, item.assignee, item.state, lists=fragments.list_of)
    if once:
        write_entry_once(out, item.state)
    # Approval fields ride on the pending calls (spec 7.2); their JSON belongs to approvals.
    for call, entry in zip(item.state.pending, out.get("pendingToolCalls", []), strict=True):
        if call.commit is not None:
            # A committed call has consumed its approval; OMA's validator refuses a commit next
            # to a request or decision (spec CK-15). The decision stays in approvalDecisions.
            continue
        if call.approval_request is not None:
            entry["approvalRequest"] = request_to_json(call.approval_request)
        if call.approval_decision is not None:
            entry["approvalDecision"] = decision_to_json(call.approval_decision)
    return out


def encode(snapshot: CheckpointSnapshot, cache: EncodeCache | None = None) -> JsonText:
    """Compact JSON text of ``snapshot`` (raises ``CheckpointError`` if it is not JSON-safe).

    NaN and infinities are refused: OMA (and any strict JSON reader) could not load them. With
    a ``cache`` (one per run), messages encoded by earlier saves are not encoded again; the text
    is the same either way. The text is a ``JsonText`` (a ``str``) that gives its JSON string
    literal from the escaped parts, each message escaped once per run.
    """
    fragments = Fragments(cache or EncodeCache())
    try:
        # Thousands of short-lived containers, none of them garbage (``gc_paused``).
        with gc_paused():
            skeleton = fragments.cache.dumps(to_json_object(snapshot, fragments))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"snapshot cannot be serialized: {exc}") from exc
    if cache is not None:
        cache.keep(fragments.used)
    # A ``JsonText``: a store that keeps values as JSON strings (the FileStore) takes its
    # literal from the escaped fragments instead of escaping the whole text again (#25).
    return EncodedText(fragments.splice(skeleton), skeleton, fragments, fragments.cache.redactor)


def _completed_to_json(item: CompletedTask, once: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"taskId": item.task_id}
    if item.assignee is not None:
        out["assignee"] = item.assignee
    if item.result is not None:
        out["result"] = item.result
    agent = item.agent_result
    if agent is not None:
        candidate = result_to_json(agent)
        if once:
            candidate["toolCalls"] = records_once(agent.tool_calls, agent.messages)
        if not _serializable(candidate):
            return out  # CK-10: save without the unserializable result; durability wins
        out["agentResult"] = candidate
    return out


def _serializable(value: Any) -> bool:
    """Whether ``value`` is JSON (``compact_dumps``: orjson for plain values, about a tenth of
    the standard encoder's time on a long conversation; the standard encoder for the rest).

    Asked of every completed task's result at every whole save.
    """
    try:
        compact_dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def decode(text: str, *, key: str) -> CheckpointSnapshot:
    """Parse and validate a stored checkpoint value.

    Raises:
        CheckpointError: not JSON, or not a checkpoint snapshot (the reason is named).
        UnsupportedSchemaError: a ``version`` this build cannot read.
    """
    with gc_paused():
        return _decode(text, key=key)


def _decode(text: str, *, key: str) -> CheckpointSnapshot:
    try:
        raw = loads(text, parse_constant=reject_constant)  # orjson where it is json's
    except (json.JSONDecodeError, ValueError):
        raise CheckpointError(
            f'Checkpoint: stored value at "{key}" is not valid JSON.{sealed_note(text)}'
        ) from None
    if isinstance(raw, dict) and raw.get("version") not in READ_VERSIONS:
        raise UnsupportedSchemaError(raw.get("version"), READ_VERSIONS)
    reason = problem(raw)
    if reason is not None:
        raise CheckpointError(
            f'Checkpoint: stored value at "{key}" is not a checkpoint snapshot: {reason}.'
        )
    try:
        return from_json_object(raw)
    except (KeyError, TypeError, ValueError, AttributeError, DurableApprovalError) as exc:
        raise CheckpointError(
            f'Checkpoint: stored value at "{key}" is not a checkpoint snapshot: {exc!r}.'
        ) from exc


def from_json_object(raw: dict[str, Any]) -> CheckpointSnapshot:
    """Build the typed snapshot from a validated JSON object (v1..v5)."""
    version: int = raw["version"]
    identity = None
    if version >= 2:
        ident = raw["identity"]
        identity = RunIdentity(
            run_id=ident["runId"],
            attempt=ident["attempt"],
            trace_id=ident["lastTraceId"],
            root_span_id=ident["lastRootSpanId"],
        )
    run_id = identity.run_id if identity else str(raw.get("runId") or "")
    tasks = tuple(task_from_json(t) for t in raw["queue"]["tasks"])
    completed = tuple(
        CompletedTask(
            task_id=item["taskId"],
            assignee=item.get("assignee"),
            result=item.get("result"),
            agent_result=_agent_result(item),
        )
        for item in raw["completedTaskResults"]
        if isinstance(item, dict) and isinstance(item.get("taskId"), str)
    )
    once = written_once(raw)
    in_flight = tuple(
        InFlightTask(
            task_id=e["taskId"],
            assignee=e["assignee"],
            state=restore_entry(_runner_state(e, once), e, f"in-flight task {e['taskId']!r}"),
        )
        for e in (raw.get("inFlightTasks") or [] if version >= 3 else [])
    )
    synthesis = raw.get("synthesisResult")
    return CheckpointSnapshot(
        version=version,
        mode=raw["mode"],
        run_id=run_id,
        attempt=identity.attempt if identity else 1,
        revision=int(raw.get("revision", 0)),
        created_at=raw["createdAt"],
        tasks=tasks,
        identity=identity,
        goal=raw.get("goal"),
        metadata=raw.get("metadata"),
        shared_memory=raw.get("sharedMemory"),
        message_bus=raw.get("messageBus"),
        turn_count=raw.get("turnCount"),
        completed=completed,
        in_flight=in_flight,
        pending_approvals=tuple(
            request_from_json(r)
            for r in (raw.get("pendingApprovals") or [] if version >= 4 else [])
        ),
        approval_decisions=tuple(
            decision_from_json(d)
            for d in (raw.get("approvalDecisions") or [] if version >= 4 else [])
        ),
        synthesis=result_from_json(synthesis, "") if isinstance(synthesis, dict) else None,
        planning_usage=(
            usage_from_json(raw["planningTokenUsage"]) if "planningTokenUsage" in raw else None
        ),
        announced=(
            tuple(str(item) for item in raw["announcedTaskIds"])
            if isinstance(raw.get("announcedTaskIds"), list)
            else None
        ),
        plan=queue_plan_from_json(raw["queue"]),
        forked_from=(
            ForkedFrom(run_id=raw["forkedFrom"]["runId"], seq=raw["forkedFrom"]["seq"])
            if "forkedFrom" in raw
            else None
        ),
        raw=raw,
        source=raw,
    )


def _agent_result(item: dict[str, Any]) -> AgentRunResult | None:
    """A completed task's ``agentResult``, its outputs written once put back (``once``)."""
    if "agentResult" not in item:
        return None
    raw = item["agentResult"]
    agent = result_from_json(raw, item.get("result") or "")
    if not isinstance(raw, dict):
        return agent
    where = f"the result of task {item['taskId']!r}"
    records = restore_records(agent.tool_calls, raw.get("toolCalls"), agent.messages, where)
    return replace(agent, tool_calls=records)


def _runner_state(entry: dict[str, Any], once: bool) -> RunnerState:
    """An in-flight entry's runner state, with approval fields parsed and bound (CK-15).

    ``once``: the snapshot may hold records written once (``written_once``); those that
    ``restore_entry`` rebuilds from the raw entry are not decoded here too (P5).
    """
    rebuilt = once and rebuilds_records(entry)
    state = runner_from_json({**entry, "toolCalls": []} if rebuilt else entry)
    raw_pending = entry.get("pendingToolCalls") or []
    pending = []
    for call, raw in zip(state.pending, raw_pending, strict=True):
        request = raw.get("approvalRequest")
        decision = raw.get("approvalDecision")
        parsed_request = request_from_json(request) if request is not None else None
        parsed_decision = (
            decision_from_json(decision, request=parsed_request) if decision is not None else None
        )
        pending.append(
            replace(call, approval_request=parsed_request, approval_decision=parsed_decision)
        )
    return replace(state, pending=tuple(pending))

"""The ledgers a crash child writes and its parent reads (crash matrix 3.2).

A crashed process loses everything it held in memory, so whatever the parent asserts over is
written outside it, line by line, as it happens:

- ``effects.jsonl``: every tool call's ``enter`` / ``effect`` / ``dedupe`` / ``return``;
- ``model_calls.jsonl``: every model call, with the tool results the model was shown;
- ``events-<pid>.jsonl``: every progress event of one process;
- ``gates.jsonl``: every call of an approval gate;
- ``result.json``: the essentials of the ``TeamRunResult`` (only when the process finishes).

Each line goes out with one ``os.write`` on an ``O_APPEND`` descriptor, so lines of concurrent
writers never interleave and nothing sits in a Python buffer that ``os._exit`` would drop; the
lines that must survive a crash right after them (effects, gates) are also fsynced.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from oma_actors import TeamRunResult
from oma_actors.clock import to_iso
from oma_actors.events import ApprovalPending, ProgressEvent

EFFECTS = "effects.jsonl"
MODEL_CALLS = "model_calls.jsonl"
GATES = "gates.jsonl"
RESULT = "result.json"


def events_file(pid: int) -> str:
    """The name of process ``pid``'s event ledger."""
    return f"events-{pid}.jsonl"


def append_line(path: Path, record: dict[str, Any], *, sync: bool = False) -> None:
    """Append one JSON line with a single unbuffered write (O_APPEND), optionally fsynced."""
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSON-lines ledger (an absent file is empty)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def event_record(event: ProgressEvent) -> dict[str, Any]:
    """An event's type name and its scalar fields (plus the result output, if any)."""
    record: dict[str, Any] = {"type": type(event).__name__, "pid": os.getpid()}
    for item in dataclasses.fields(event):
        value = getattr(event, item.name)
        if value is None or isinstance(value, str | int | bool | float):
            record[item.name] = value
        elif item.name == "result":
            record["output"] = getattr(value, "output", None)
    if isinstance(event, ApprovalPending):
        request = event.request
        record.update(request_id=request.id, request_hash=request.request_hash, scope=request.scope)
    return record


def result_record(result: TeamRunResult) -> dict[str, Any]:
    """The essentials of a ``TeamRunResult``, keyed by task title (stable across processes)."""
    tasks: dict[str, Any] = {}
    for task in result.tasks:
        agent_result = result.task_results.get(task.id)
        tasks[task.title] = {
            "id": task.id,
            "status": task.status,
            "result": task.result,
            "output": agent_result.output if agent_result else None,
            "success": agent_result.success if agent_result else None,
            "turns": agent_result.turns if agent_result else None,
            "usage": (
                [agent_result.token_usage.input_tokens, agent_result.token_usage.output_tokens]
                if agent_result
                else None
            ),
            "tool_calls": (
                [[call.tool_name, call.output] for call in agent_result.tool_calls]
                if agent_result
                else None
            ),
        }
    coordinator = result.agent_results.get("coordinator")
    return {
        "pid": os.getpid(),
        "run_id": result.run_id,
        "attempt": result.attempt,
        "success": result.success,
        "status": result.status.code,
        "status_message": result.status.message,
        "tasks": tasks,
        "coordinator": coordinator.output if coordinator is not None else None,
        "token_usage": [result.token_usage.input_tokens, result.token_usage.output_tokens],
        "pending_approvals": [
            {"id": r.id, "hash": r.request_hash, "scope": r.scope, "boundary": r.boundary}
            for r in result.pending_approvals
        ],
        "approval_decisions": [
            {
                "request_id": d.request_id,
                "hash": d.request_hash,
                "scope": d.scope,
                "decision": d.decision,
                "reviewer": d.reviewer.id,
                "decided_at": to_iso(d.decided_at),
            }
            for d in result.approval_decisions
        ],
    }

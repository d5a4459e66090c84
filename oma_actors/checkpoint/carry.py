"""Writing back the members of a restored checkpoint that this model does not hold.

The lossless re-save rule: a checkpoint written by another writer (the TypeScript OMA, a newer
build of ours) and then restored and saved here keeps every member that writer put there. Members
we model are written from the typed snapshot, so they follow the run's real state transitions;
every other member of an object is copied from the same object of the source, found by its
identity (a task id, a tool call id, a memory key, a request id), never by position. Only objects
that still exist are completed: a finished task's in-flight entry is not brought back. Queue
tasks and plan revisions live on in the run's queue, so they keep theirs on the typed value
(``TaskState.extra``, ``PlanRevision.extra``) rather than here.

A known member we leave out when it holds its default (``loopWarned: false``, ``turns: 0``) is
copied too when the source spelled that very default out, so even its presence is kept. A known
member the source holds with another value is never copied: our typed state is the truth.

``forkedFrom`` (decision D17) is modelled (``forked_from``) yet deliberately left out of
``ROOT``: a run's later snapshots are built afresh from its live state, and its origin never
changes, so a forked run keeps it through every re-save by carrying it from its source.

Members deliberately not carried: v5's journal fields (``journalWatermarkSeq``, ``journalRef``,
an in-flight entry's ``journalSeq`` and ``conversationLineage``), because we write v4 and a
lineage describes a conversation we may have changed since. Members inside messages and content
blocks are not carried either: the conversation is re-rendered from its typed form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Shape:
    """What this model holds of one kind of object.

    Attributes:
        known: the members written from the typed snapshot; the rest is carried.
        defaults: known members left out at these values; a source that spelled the value out
            keeps it.
    """

    known: frozenset[str]
    defaults: Mapping[str, object] = field(default_factory=dict)


def _shape(*known: str, **defaults: object) -> Shape:
    return Shape(frozenset(known) | frozenset(defaults), defaults)


ROOT = _shape(
    "version", "mode", "createdAt", "revision", "metadata", "identity", "goal", "queue",
    "sharedMemory", "messageBus", "turnCount", "completedTaskResults", "inFlightTasks",
    "pendingApprovals", "approvalDecisions", "synthesisResult", "planningTokenUsage",
    "announcedTaskIds",
    "runId",  # v1's top-level run id: written as identity.runId
    "journalWatermarkSeq", "journalRef",  # v5 only; we write v4
)  # fmt: skip
IDENTITY = _shape("runId", "attempt", "lastTraceId", "lastRootSpanId")
QUEUE = _shape(
    "version", "tasks", "pending", "inProgress", "completed", "failed", "blocked", "skipped",
    "planRevision", "planRevisions",
)  # fmt: skip
MEMORY = _shape("version", "turnCount", "entries")
MEMORY_ENTRY = _shape("key", "value", "metadata", "createdAt", "expiresAtTurn")
COMPLETED = _shape("taskId", "assignee", "result", "agentResult")
AGENT_RESULT = _shape("success", "output", "messages", "tokenUsage", "toolCalls", turns=0)
IN_FLIGHT = _shape(
    "taskId", "assignee", "phase", "conversationMessages", "messages", "tokenUsage", "toolCalls",
    "turns", "pendingToolCalls", "pendingToolResultText", "finalOutput", "success",
    "journalSeq", "conversationLineage",  # v5 only; we write v4
    "messagesFrom",  # a journal-first snapshot's (checkpoint.once): never carried
    loopWarned=False, loopDetected=False, budgetExceeded=False,
)  # fmt: skip
PENDING_CALL = _shape("call", "commit", "approvalRequest", "approvalDecision", "dispatched")
COMMIT = _shape("result", "record", "delegationUsage")
REQUEST = _shape(
    "version", "id", "runId", "scope", "boundary", "requestHash", "requestedAt", "reason", "content"
)
DECISION = _shape(
    "version",
    "requestId",
    "runId",
    "scope",
    "requestHash",
    "decision",
    "reviewer",
    "decidedAt",
    "editedInput",
    "editHash",
)


def carry(ours: Json, source: object, shape: Shape) -> None:
    """Add to ``ours`` every member of ``source`` it lacks that ``shape`` does not model."""
    if not isinstance(source, Mapping):
        return
    for key, value in source.items():
        if key in ours:
            continue
        if key not in shape.known or _spelled_default(shape, key, value):
            ours[key] = value


def _spelled_default(shape: Shape, key: str, value: object) -> bool:
    if key not in shape.defaults:
        return False
    default = shape.defaults[key]
    # ``type`` first: False == 0 in Python, but ``turns: false`` is not the default of turns.
    return type(value) is type(default) and value == default


def carry_snapshot(out: Json, source: Mapping[str, Any] | None) -> None:
    """Complete the snapshot JSON ``out`` with what ``source`` holds and we do not model."""
    if not isinstance(source, Mapping):
        return
    carry(out, source, ROOT)
    _member(out, source, "identity", IDENTITY)
    _member(out, source, "queue", QUEUE)
    memory, origin = out.get("sharedMemory"), source.get("sharedMemory")
    if isinstance(memory, dict) and isinstance(origin, Mapping):
        carry(memory, origin, MEMORY)
        for entry, found in _pairs(memory.get("entries"), origin.get("entries"), _key("key")):
            carry(entry, found, MEMORY_ENTRY)
    for entry, found in _pairs(
        out.get("completedTaskResults"), source.get("completedTaskResults"), _key("taskId")
    ):
        carry(entry, found, COMPLETED)
        _member(entry, found, "agentResult", AGENT_RESULT)
    in_flight = _pairs(out.get("inFlightTasks"), source.get("inFlightTasks"), _key("taskId"))
    for entry, found in in_flight:
        carry(entry, found, IN_FLIGHT)
        _pending_calls(entry.get("pendingToolCalls"), found.get("pendingToolCalls"))
    for request, found in _pairs(
        out.get("pendingApprovals"), source.get("pendingApprovals"), _key("id")
    ):
        carry(request, found, REQUEST)
    for decision, found in _pairs(
        out.get("approvalDecisions"), source.get("approvalDecisions"), _key("requestId")
    ):
        carry(decision, found, DECISION)


def _pending_calls(ours: object, source: object) -> None:
    for call, found in _pairs(ours, source, _call_id):
        carry(call, found, PENDING_CALL)
        _member(call, found, "commit", COMMIT)
        _member(call, found, "approvalRequest", REQUEST)
        _member(call, found, "approvalDecision", DECISION)


def _member(ours: Json, source: Mapping[str, Any], name: str, shape: Shape) -> None:
    """Carry into ``ours[name]`` from ``source[name]`` when both are objects."""
    value = ours.get(name)
    if isinstance(value, dict):
        carry(value, source.get(name), shape)


Identity = Callable[[Mapping[str, Any]], object]


def _key(name: str) -> Identity:
    return lambda item: item.get(name)


def _call_id(item: Mapping[str, Any]) -> object:
    call = item.get("call")
    return call.get("id") if isinstance(call, Mapping) else None


def _pairs(
    ours: object, source: object, identity: Identity
) -> Iterator[tuple[Json, Mapping[str, Any]]]:
    """Each object of ``ours`` with the object of ``source`` that has the same identity."""
    if not isinstance(ours, list) or not isinstance(source, list):
        return
    found: dict[object, Mapping[str, Any]] = {}
    for item in source:
        if isinstance(item, Mapping):
            key = identity(item)
            if isinstance(key, str):
                found.setdefault(key, item)
    for item in ours:
        if isinstance(item, dict):
            match = found.get(identity(item))
            if match is not None:
                yield item, match

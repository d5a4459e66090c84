"""OMA's journal event vocabulary (spec 17.2): one small constructor per event type.

A constructor returns an ``EventDraft``: the type, the variant's fields in OMA's order, the scope
(task, agent) and the lineage. The recorder stamps the base fields (``seq``, timestamp, run,
attempt) when it records the draft. Variant fields follow the order of OMA's vocabulary table;
optional fields are left out when ``None``, as ``JSON.stringify`` drops ``undefined``.

Lineage (JR-07): an ``assistant/message`` names its ``llm/request``; a ``tool/call`` its
``assistant/message``; a ``tool/result`` its ``tool/call``; a ``user/message`` with origin
``tool_results`` the ``tool/result`` events it gathers; a strategy-derived block its
``context/replace``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from oma_actors.domain.jsonforms import (
    block_to_json,
    message_to_json,
    record_to_json,
    record_to_json_once,
)
from oma_actors.domain.jsonforms import usage_to_json as usage_to_json
from oma_actors.journal.event import (
    ASSISTANT_MESSAGE,
    RECORDED_RESULT,
    TASK_STATUS,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    USER_MESSAGE,
)
from oma_actors.journal.jsjson import js_dumps

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.domain.messages import (
        ContentBlock,
        Message,
        TokenUsage,
        ToolResultBlock,
        ToolUseBlock,
    )
    from oma_actors.domain.results import ToolCallRecord

Json = dict[str, Any]
TurnOutcome = Literal[
    "tool_use", "completed", "loop_detected", "budget_exceeded", "suspended", "aborted", "error"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class EventDraft:
    """An event before the recorder gives it a seq: type, variant fields, scope and lineage."""

    type: str
    data: Json = field(default_factory=dict)
    task_id: str | None = None
    agent_name: str | None = None
    source_event_seqs: list[int] | None = None


def _draft(kind: str, scope: dict[str, Any], **fields: Any) -> EventDraft:
    return EventDraft(
        type=kind,
        data={key: value for key, value in fields.items() if value is not None},
        task_id=scope.get("task_id"),
        agent_name=scope.get("agent_name"),
        source_event_seqs=_seqs(scope.get("source_event_seqs")),
    )


def _seqs(seqs: Sequence[int] | None) -> list[int] | None:
    return None if seqs is None else list(seqs)


def run_started(
    *,
    mode: str,
    goal: str | None = None,
    metadata: Json | None = None,
    identity: Json | None = None,
) -> EventDraft:
    """``run/start``: an entry point (runAgent/runTeam/runTasks/runFromPlan/restore) begins.

    ``identity`` (journal-first restores only, D14): the new attempt's identity in the
    snapshot's form, so the fold carries the attempt and its trace ids and the restored
    attempt's admission is an append instead of a whole snapshot. OMA's reader ignores a data
    field it does not know; OMA's mode never writes it (its bytes stay OMA's).
    """
    return _draft("run/start", {}, mode=mode, goal=goal, metadata=metadata, identity=identity)


def run_ended(*, status: str, error: str | None = None) -> EventDraft:
    """``run/end``: the run closes, on every exit path, with its outcome as OMA writes it.

    ``status`` is the run's status code (``ok``, ``error``, ``suspended``, ``aborted`` ...),
    written ``{"code": ...}``; ``error`` the status message of a run that did not end ``ok``,
    written ``{"message": ...}``.
    """
    return _draft(
        "run/end",
        {},
        status={"code": status},
        error={"message": error} if error is not None else None,
    )


def plan_set(
    *,
    revision: int,
    source: Literal["initial", "recovery"],
    tasks: list[Json],
    detail: Json | None = None,
) -> EventDraft:
    """``plan/set``: a plan loaded or repaired; ``tasks``: ``[{taskId, description?, ...}]``."""
    return _draft("plan/set", {}, revision=revision, source=source, tasks=tasks, detail=detail)


def task_status(
    *,
    task_id: str,
    status: str,
    reason: str | None = None,
    updated_at: str | None = None,
    **scope: Any,
) -> EventDraft:
    """``task/status``: in_progress, completed, failed or skipped (from the queue).

    ``updated_at``: the queue's own stamp of the change (ISO, as a snapshot's ``updatedAt``);
    written only in journal-first mode, where the fold carries a task's start (D14). OMA's
    events have no such member, and OMA's reader ignores members it does not know.
    """
    return _draft(
        TASK_STATUS,
        {"task_id": task_id, **scope},
        status=status,
        reason=reason,
        updatedAt=updated_at,
    )


def turn_started(*, turn: int, **scope: Any) -> EventDraft:
    """``turn/start``: a model turn opens."""
    return _draft("turn/start", scope, turn=turn)


def turn_ended(*, turn: int, outcome: TurnOutcome, **scope: Any) -> EventDraft:
    """``turn/end``: a model turn closes, with why."""
    return _draft(TURN_END, scope, turn=turn, outcome=outcome)


def user_message(
    *,
    message: Message,
    origin: Literal["input", "seed", "tool_results"],
    recorded: Mapping[str, int] | None = None,
    **scope: Any,
) -> EventDraft:
    """``user/message``; with origin ``tool_results`` its lineage names the tool/result events.

    ``recorded`` (journal-first only): call id -> the seq of the ``tool/result`` event that
    holds exactly that call's result block. Each such block is written as a reference,
    ``{"type": "tool_result", "tool_use_id": ..., "recorded": seq}``, so an output reaches
    the journal once (issue 19); the fold takes the block from the call's commit. OMA's mode
    passes none: its bytes stay OMA's.
    """
    raw = message_to_json(message)
    if recorded:
        raw["content"] = [_reference(block, recorded) for block in raw["content"]]
    return _draft(USER_MESSAGE, scope, message=raw, origin=origin)


def _reference(block: Json, recorded: Mapping[str, int]) -> Json:
    """``block``, or the reference standing for it when a ``tool/result`` holds it."""
    if block.get("type") != "tool_result":
        return block
    seq = recorded.get(block["tool_use_id"])
    if seq is None:
        return block
    return {"type": "tool_result", "tool_use_id": block["tool_use_id"], RECORDED_RESULT: seq}


def assistant_message(
    *,
    message: Message,
    origin: Literal["response", "seed"] = "response",
    usage: TokenUsage | None = None,
    model: str | None = None,
    stop_reason: str | None = None,
    **scope: Any,
) -> EventDraft:
    """``assistant/message``; its lineage names its ``llm/request``."""
    return _draft(
        ASSISTANT_MESSAGE,
        scope,
        message=message_to_json(message),
        origin=origin,
        usage=None if usage is None else usage_to_json(usage),
        model=model,
        stopReason=stop_reason,
    )


def llm_request(
    *,
    turn: int,
    model: str,
    blocks: list[Json],
    system_prompt_hash: str | None = None,
    tools_hash: str | None = None,
    **scope: Any,
) -> EventDraft:
    """``llm/request``: immediately before an adapter call; ``blocks`` from ``request_block``."""
    return _draft(
        "llm/request",
        scope,
        turn=turn,
        model=model,
        blocks=blocks,
        systemPromptHash=system_prompt_hash,
        toolsHash=tools_hash,
    )


def tool_call(*, call: ToolUseBlock, **scope: Any) -> EventDraft:
    """``tool/call``: the model asked for a tool, before it runs; lineage: its assistant message."""
    return _draft(TOOL_CALL, scope, call=block_to_json(call))


def tool_result(
    *,
    result: ToolResultBlock,
    record: ToolCallRecord | None = None,
    delegation_usage: TokenUsage | None = None,
    once: bool = False,
    call: ToolUseBlock | None = None,
    **scope: Any,
) -> EventDraft:
    """``tool/result``: a tool result was committed; lineage: its ``tool/call``.

    ``once`` (journal-first only): each fact is written once (issue 19): the output in
    ``result``, and the record without the members ``call`` (when known) and the result
    already hold (``record_to_json_once``); the fold puts them back from the entry's pending
    call. OMA's mode writes OMA's record in full.
    """
    raw_record = None
    if record is not None:
        raw_record = record_to_json_once(record, call, result) if once else record_to_json(record)
    return _draft(
        TOOL_RESULT,
        scope,
        toolCallId=result.tool_use_id,
        result=block_to_json(result),
        record=raw_record,
        delegationUsage=None if delegation_usage is None else usage_to_json(delegation_usage),
    )


def context_replaced(
    *,
    strategy: str,
    replacements: list[Json],
    dropped: Sequence[int] | None = None,
    detail: Json | None = None,
    **scope: Any,
) -> EventDraft:
    """``context/replace``: a strategy rewrote the conversation.

    ``replacements`` are ``{"sourceEventSeqs": [...], "block": {...}}``; ``dropped`` the seqs of
    the events whose blocks left the conversation.
    """
    gone = None if dropped is None else {"sourceEventSeqs": list(dropped)}
    return _draft(
        "context/replace",
        scope,
        strategy=strategy,
        dropped=gone,
        replacements=replacements,
        detail=detail,
    )


def memory_set(*, agent: str, key: str, value_bytes: int | None = None, **scope: Any) -> EventDraft:
    """``memory/set``: a task result was written to shared memory."""
    return _draft("memory/set", scope, agent=agent, key=key, valueBytes=value_bytes)


def approval_requested(*, request: Json, **scope: Any) -> EventDraft:
    """``approval/request``: a durable approval boundary was persisted."""
    return _draft("approval/request", scope, request=request)


def approval_decided(*, decision: Json, **scope: Any) -> EventDraft:
    """``approval/decision``: a durable decision was reconciled or made."""
    return _draft("approval/decision", scope, decision=decision)


def checkpoint_saved(*, mode: str, version: int, watermark_seq: int) -> EventDraft:
    """``checkpoint/saved``: a snapshot persisted; ``watermark_seq`` taken when built (JR-08)."""
    return _draft("checkpoint/saved", {}, mode=mode, version=version, watermarkSeq=watermark_seq)


def canonical_content_hash(value: Any) -> str:
    """sha256 (hex) of canonical JSON: keys sorted recursively, arrays in order (JR-07).

    ``value`` is a JSON value or a content block (converted to its JSON form first).
    """
    if not isinstance(value, dict | list | str | int | float | bool | type(None)):
        value = block_to_json(value)
    return hashlib.sha256(js_dumps(value, sort_keys=True).encode()).hexdigest()


def request_block(
    *,
    message_index: int,
    block_index: int,
    role: Literal["user", "assistant"],
    block: ContentBlock | Json,
    source_event_seqs: Sequence[int] | None,
    content_hash: str | None = None,
) -> Json:
    """One ``RequestBlockDescriptor`` of an ``llm/request`` (lineage ``None``: none recorded).

    ``content_hash``: the block's ``canonical_content_hash`` when the caller has it already.
    """
    if content_hash is not None and not isinstance(block, dict):
        block_type: Any = block.type
    else:
        as_json = block if isinstance(block, dict) else block_to_json(block)
        block_type, content_hash = as_json.get("type"), canonical_content_hash(as_json)
    return {
        "messageIndex": message_index,
        "blockIndex": block_index,
        "role": role,
        "blockType": block_type,
        "sourceEventSeqs": _seqs(source_event_seqs),
        "contentHash": content_hash,
    }

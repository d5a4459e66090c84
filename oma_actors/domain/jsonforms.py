"""JSON forms of the domain values that snapshots and approval records hold (OMA camelCase).

Decoders assume the value passed ``validate``; they raise ``CheckpointError`` on anything else
they cannot map rather than guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import orjson

from oma_actors.domain.inflight import PendingCall, RunnerState, ToolCommit
from oma_actors.domain.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
    text_of,
)
from oma_actors.domain.results import AgentRunResult, ToolCallRecord

# The queue's forms live in taskforms; re-exported here, where the other forms are.
from oma_actors.domain.taskforms import plan_revision_from_json as plan_revision_from_json
from oma_actors.domain.taskforms import plan_revision_to_json as plan_revision_to_json
from oma_actors.domain.taskforms import queue_plan_from_json as queue_plan_from_json
from oma_actors.domain.taskforms import task_from_json as task_from_json
from oma_actors.domain.taskforms import task_to_json as task_to_json
from oma_actors.errors import CheckpointError

Json = dict[str, Any]


def block_to_json(block: ContentBlock) -> Json:
    """One content block in Anthropic's JSON shape."""
    match block:
        case TextBlock(text=text):
            return {"type": "text", "text": text}
        case ToolUseBlock(id=call_id, name=name, input=args):
            return {"type": "tool_use", "id": call_id, "name": name, "input": args}
        case ToolResultBlock(tool_use_id=call_id, content=content, is_error=is_error):
            out: Json = {"type": "tool_result", "tool_use_id": call_id}
            out["content"] = (
                content if isinstance(content, str) else [block_to_json(b) for b in content]
            )
            if is_error:
                out["is_error"] = True
            return out
        case ReasoningBlock(text=text, signature=signature):
            reasoning: Json = {"type": "reasoning", "text": text}
            if signature is not None:
                reasoning["signature"] = signature
            return reasoning
        case ImageBlock(media_type=media_type, data=data, url=url):
            source: Json = (
                {"type": "url", "url": url}
                if url is not None
                else {"type": "base64", "media_type": media_type, "data": data}
            )
            return {"type": "image", "source": source}
        case _:
            # The type says this cannot happen, but a caller's value (a CustomContext result,
            # a tool's rich content) may still be a dict or None: rendered as ``null`` it would
            # overwrite the latest snapshot with one ``block_from_json`` refuses.
            raise CheckpointError(
                f"not a content block: {type(block).__name__} (content blocks are TextBlock, "
                "ImageBlock, ReasoningBlock, ToolUseBlock or ToolResultBlock)"
            )


def block_from_json(raw: Any) -> ContentBlock:
    """Parse one content block; unknown types are refused, never dropped."""
    if not isinstance(raw, dict):
        raise CheckpointError(f"content block is not an object: {raw!r}")
    kind = raw.get("type")
    if kind == "text":
        return TextBlock(str(raw.get("text", "")))
    if kind == "tool_use":
        return ToolUseBlock(str(raw["id"]), str(raw["name"]), dict(raw.get("input") or {}))
    if kind == "tool_result":
        content = raw.get("content", "")
        parsed: str | list[ContentBlock] = (
            content if isinstance(content, str) else [block_from_json(b) for b in content]
        )
        return ToolResultBlock(str(raw["tool_use_id"]), parsed, is_error=bool(raw.get("is_error")))
    if kind == "reasoning":
        return _reasoning(raw)
    if kind == "image":
        source = raw.get("source") or {}
        if source.get("type") == "url":
            return ImageBlock(str(source.get("media_type", "")), url=str(source["url"]))
        return ImageBlock(str(source.get("media_type", "")), data=str(source.get("data", "")))
    raise CheckpointError(f"unknown content block type {kind!r}")


def _reasoning(raw: Json) -> ReasoningBlock:
    # The thinking and its signature are re-sent verbatim: a wrong type is corruption, never
    # something to coerce (a provider would refuse the altered thinking anyway).
    text, signature = raw.get("text"), raw.get("signature")
    if not isinstance(text, str):
        raise CheckpointError(f"reasoning block text is not a string: {text!r}"[:200])
    if signature is not None and not isinstance(signature, str):
        raise CheckpointError(f"reasoning block signature is not a string: {signature!r}"[:200])
    return ReasoningBlock(text, signature=signature)


def message_to_json(message: Message) -> Json:
    """A message as ``{role, content: [blocks]}``."""
    return {"role": message.role, "content": [block_to_json(b) for b in message.content]}


def message_from_json(raw: Any) -> Message:
    """Parse a message; a string content becomes one text block."""
    if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant"):
        raise CheckpointError(f"message is not a user/assistant object: {raw!r}"[:200])
    content = raw.get("content")
    if isinstance(content, str):
        return Message(raw["role"], [TextBlock(content)])
    if not isinstance(content, list):
        raise CheckpointError(f"message content is neither a string nor a list: {content!r}")
    return Message(raw["role"], [block_from_json(b) for b in content])


def usage_to_json(usage: TokenUsage) -> Json:
    """``{input_tokens, output_tokens}``."""
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}


def usage_from_json(raw: Any) -> TokenUsage:
    """Parse a token usage (missing means zero)."""
    raw = raw or {}
    return TokenUsage(int(raw.get("input_tokens", 0)), int(raw.get("output_tokens", 0)))


def record_to_json(record: ToolCallRecord) -> Json:
    """OMA's ``{toolName, input, output, duration}``."""
    return {
        "toolName": record.tool_name,
        "input": record.input,
        "output": record.output,
        "duration": record.duration_ms,
    }


def record_from_json(raw: Any, *, tool_call_id: str = "", is_error: bool = False) -> ToolCallRecord:
    """Parse a tool call record."""
    return ToolCallRecord(
        tool_name=str(raw.get("toolName", "")),
        input=dict(raw.get("input") or {}),
        output=str(raw.get("output", "")),
        duration_ms=int(raw.get("duration", 0)),
        tool_call_id=tool_call_id,
        is_error=is_error,
    )


def records_from_json(raw: Sequence[Any], messages: Sequence[Message]) -> list[ToolCallRecord]:
    """OMA's tool call records, each with the id and error flag of the call it records.

    OMA's record has neither (``{toolName, input, output, duration}``); the conversation the
    records belong to has both: a record is given those of the first call not given yet whose
    tool name and input are the record's and whose result reads as its output. A record no call
    matches (its call rewritten away by a context strategy) keeps ``""`` and ``False``. Linear
    in the calls: the records come in about the calls' order.
    """
    records = [record_from_json(r) for r in raw]
    if not records:
        return records
    # Each call with its result, paired in conversation order (an id may recur across turns).
    calls: dict[str, list[tuple[ToolUseBlock, ToolResultBlock]]] = {}
    opened: dict[str, list[ToolUseBlock]] = {}
    for message in messages:
        for block in message.content:
            if isinstance(block, ToolUseBlock):
                opened.setdefault(block.id, []).append(block)
            elif isinstance(block, ToolResultBlock) and opened.get(block.tool_use_id):
                use = opened[block.tool_use_id].pop(0)
                calls.setdefault(use.name, []).append((use, block))
    out = []
    for record in records:
        candidates = calls.get(record.tool_name, [])
        for index, (use, result) in enumerate(candidates):
            if use.input == record.input and text_of(result.content) == record.output:
                del candidates[index]
                record = replace(record, tool_call_id=use.id, is_error=result.is_error)
                break
        out.append(record)
    return out


def record_to_json_once(
    record: ToolCallRecord, call: ToolUseBlock | None, result: ToolResultBlock
) -> Json:
    """OMA's record without the members its call and its result already hold.

    Journal-first (issue 19, item 5) each fact is written once: a record's ``toolName`` and
    ``input`` are usually its call's, its ``output`` its result's text. A member that differs
    (an input an approval edited, an output the tool reported apart) stays.
    ``record_from_json_once`` reads it back.
    """
    out = record_to_json(record)
    if call is not None and record.tool_name == call.name:
        del out["toolName"]
    if call is not None and record.input == call.input:
        del out["input"]
    if record.output == text_of(result.content):
        del out["output"]
    return out


def record_from_json_once(
    raw: Json,
    call: ToolUseBlock | None,
    result: ToolResultBlock,
) -> ToolCallRecord:
    """A record written by ``record_to_json_once``, or in full, its left-out members put back;
    its ``tool_call_id`` and ``is_error`` are those of ``result``, the result it records.

    Raises:
        CheckpointError: ``toolName`` or ``input`` is left out but the call is unknown.
    """
    if call is None and ("toolName" not in raw or "input" not in raw):
        raise CheckpointError(
            f"tool call record for {result.tool_use_id!r} leaves its name or input to a call "
            "that is not there"
        )
    full = dict(raw)
    if call is not None:
        full.setdefault("toolName", call.name)
        full.setdefault("input", call.input)
    full.setdefault("output", text_of(result.content))
    return record_from_json(full, tool_call_id=result.tool_use_id, is_error=result.is_error)


def result_to_json(result: AgentRunResult) -> Json:
    """A JSON-safe copy of an ``AgentRunResult``, as a completed task's result is saved (CK-09)."""
    out: Json = {
        "success": result.success,
        "output": result.output,
        "messages": [message_to_json(m) for m in result.messages],
        "tokenUsage": usage_to_json(result.token_usage),
        "toolCalls": [record_to_json(r) for r in result.tool_calls],
    }
    if result.turns:
        # Our member; OMA's results have none, and absent reads back as 0.
        out["turns"] = result.turns
    return out


def result_from_json(raw: Any, fallback_output: str) -> AgentRunResult:
    """Parse a stored result, or build OMA's minimal result when it is absent (CK-10).

    A result that could not be serialized was left out of the snapshot; it comes back as a
    success whose output is ``fallback_output`` (the task's result text), with no messages,
    usage or tool calls.
    """
    if not isinstance(raw, dict):
        return AgentRunResult(success=True, output=fallback_output)
    messages = [message_from_json(m) for m in raw.get("messages") or []]
    return AgentRunResult(
        success=bool(raw.get("success", True)),
        output=str(raw.get("output", fallback_output)),
        messages=messages,
        token_usage=usage_from_json(raw.get("tokenUsage")),
        tool_calls=records_from_json(raw.get("toolCalls") or [], messages),
        turns=int(raw.get("turns", 0)),
    )


def pending_to_json(item: PendingCall) -> Json:
    """A pending call with its commit record (and our ``dispatched`` mark, decision D1)."""
    out: Json = {"call": block_to_json(item.call)}
    if item.commit is not None:
        out["commit"] = {
            "result": block_to_json(item.commit.block),
            "record": record_to_json(item.commit.record),
        }
        if item.commit.delegation_usage is not None:
            out["commit"]["delegationUsage"] = usage_to_json(item.commit.delegation_usage)
    if item.dispatched:
        out["dispatched"] = True
    return out


def pending_from_json(raw: Any) -> PendingCall:
    """Parse a pending call."""
    call = block_from_json(raw["call"])
    if not isinstance(call, ToolUseBlock):
        raise CheckpointError("pending call is not a tool_use block")
    commit = raw.get("commit")
    parsed: ToolCommit | None = None
    if commit is not None:
        block = block_from_json(commit["result"])
        if not isinstance(block, ToolResultBlock):
            raise CheckpointError(f"commit of {call.id!r} is not a tool_result block")
        record = record_from_json(commit["record"], tool_call_id=call.id, is_error=block.is_error)
        delegated = commit.get("delegationUsage")
        parsed = ToolCommit(
            block=block,
            record=record,
            delegation_usage=usage_from_json(delegated) if delegated is not None else None,
        )
    return PendingCall(call=call, commit=parsed, dispatched=bool(raw.get("dispatched")))


def _list_of(items: Sequence[Any], render: Callable[[Any], Json]) -> Any:
    return [render(item) for item in items]


ListRenderer = Callable[[Sequence[Any], Callable[[Any], Json]], Any]


def runner_to_json(
    task_id: str, assignee: str, state: RunnerState, *, lists: ListRenderer = _list_of
) -> Json:
    """An ``InFlightTaskCheckpoint`` (spec 7.2).

    ``lists`` renders the long, append-only lists (messages, tool records); the codec passes one
    that reuses text encoded by earlier saves.
    """
    out: Json = {
        "taskId": task_id,
        "assignee": assignee,
        "phase": state.phase,
        "conversationMessages": lists(state.conversation, message_to_json),
        "messages": lists(state.messages, message_to_json),
        "tokenUsage": usage_to_json(state.token_usage),
        "toolCalls": lists(state.tool_calls, record_to_json),
        "turns": state.turns,
    }
    if state.phase == "executing_tools":
        out["pendingToolCalls"] = [pending_to_json(p) for p in state.pending]
        if state.pending_tool_result_text is not None:
            out["pendingToolResultText"] = state.pending_tool_result_text
    if state.phase == "completed":
        out["finalOutput"] = state.final_output
        # OMA's entry has no ``success``: a spent budget says it through ``budgetExceeded``
        # alone. Only a failure OMA never persists (max turns, a model error) needs the member.
        if not state.success and not state.budget_exceeded:
            out["success"] = False
    # Written only when set, as OMA writes them (spec 7.2).
    if state.loop_warned:
        out["loopWarned"] = True
    if state.loop_detected:
        out["loopDetected"] = True
    if state.budget_exceeded:
        out["budgetExceeded"] = True
    return out


def _messages(
    raw: Any, raw_conversation: Any, conversation: tuple[Message, ...]
) -> tuple[Message, ...]:
    """The entry's ``messages``: the run's own messages, as a rule the conversation's end.

    A running runner appends each message to both lists, so an entry holds the same messages
    twice (OMA's format, spec 7.2). Where the entry's ``messages`` equal the end of its
    conversation as parsed JSON, they are the conversation's decoded messages (frozen, so
    shared as the running runner shares them), not decoded again: about half of a long
    snapshot's messages (P5). Anything else is decoded on its own.
    """
    if isinstance(raw, list) and isinstance(raw_conversation, list):
        start = len(raw_conversation) - len(raw)
        if start >= 0 and _same_json(raw, raw_conversation[start:]):
            return conversation[start:]
    return tuple(message_from_json(m) for m in raw)


def _same_json(a: list[Any], b: list[Any]) -> bool:
    """Whether two parsed JSON lists are the same JSON value (Python's ``==`` also takes
    ``1 == 1.0 == True``, which JSON tells apart)."""
    if a != b:
        return False
    try:
        return orjson.dumps(a) == orjson.dumps(b)
    except TypeError:  # an integer past 64 bits (read exactly by ``json``): not worth a walk
        return False


def runner_from_json(raw: Json) -> RunnerState:
    """Parse an in-flight entry into runner state."""
    phase = raw["phase"]
    budget_exceeded = raw.get("budgetExceeded") is True
    # A runner that completed over its budget did not succeed (RN-04 #7), whatever else it says.
    ended_over_budget = phase == "completed" and budget_exceeded
    raw_conversation = raw["conversationMessages"]
    conversation = tuple(message_from_json(m) for m in raw_conversation)
    pending = tuple(pending_from_json(p) for p in raw.get("pendingToolCalls") or ())
    # The records of this round's commits pair with results not in the conversation yet.
    committed: list[ContentBlock] = [p.commit.block for p in pending if p.commit is not None]
    paired = (*conversation, Message("user", committed)) if committed else conversation
    return RunnerState(
        phase=phase,
        conversation=conversation,
        messages=_messages(raw["messages"], raw_conversation, conversation),
        turns=int(raw["turns"]),
        token_usage=usage_from_json(raw["tokenUsage"]),
        tool_calls=tuple(records_from_json(raw["toolCalls"], paired)),
        pending=pending,
        final_output=str(raw.get("finalOutput", "")),
        success=bool(raw.get("success", True)) and not ended_over_budget,
        budget_exceeded=budget_exceeded,
        loop_warned=raw.get("loopWarned") is True,
        loop_detected=raw.get("loopDetected") is True,
        pending_tool_result_text=(
            str(raw["pendingToolResultText"])
            if phase == "executing_tools" and raw.get("pendingToolResultText") is not None
            else None
        ),
    )

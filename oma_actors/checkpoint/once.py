"""A journal-first snapshot holds each tool output once (issue 19, item 5). No I/O.

OMA's in-flight entry says most of its conversation twice, and each tool output three times:
``messages`` (the runner's own messages) is, unless a context strategy rewrote the
conversation, the tail of ``conversationMessages`` after the prompt; and each ``toolCalls``
record repeats its call (``toolName``, ``input``) and its result's text (``output``) from
those messages (``after_tool_results`` appends the records and the message of their results
together, in call order, so the n-th record pairs with the n-th result block). A completed
task's ``agentResult`` repeats its records the same way.

A snapshot that depends on its journal (``journalRef.durable``, D15) is read only by us, with
its journal, so there each is written once: the entry's ``messages`` is ``[]`` with
``messagesFrom: k`` (``conversationMessages[k:]``), and a record leaves out the members its
call and result hold (``record_to_json_once``). ``decode`` puts both back (``restore_entry``,
``restore_records``), sharing the message objects. OMA's mode (and any snapshot without a
durable journal) writes OMA's form, every member in full.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors.domain.jsonforms import (
    record_from_json_once,
    record_to_json,
    record_to_json_once,
)
from oma_actors.domain.messages import ToolResultBlock, ToolUseBlock
from oma_actors.errors import CheckpointError
from oma_actors.journal.fields import is_journaled
from oma_actors.journal.ref import DURABLE_MEMBER

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.messages import Message
    from oma_actors.domain.results import ToolCallRecord
    from oma_actors.domain.snapshot import CheckpointSnapshot

MESSAGES_FROM = "messagesFrom"
"""The in-flight entry member saying ``messages`` is ``conversationMessages[k:]`` (``[]``
written)."""

Json = dict[str, Any]


def writes_once(snapshot: CheckpointSnapshot) -> bool:
    """Whether ``snapshot`` is written with each output once: it is written as v5 with a
    durable ``journalRef`` of its own (a restored snapshot's source does not count: a save
    without a journal writes OMA's v4)."""
    ref = snapshot.journal_ref
    return is_journaled(snapshot) and ref is not None and ref.get(DURABLE_MEMBER) is True


def messages_from(state: RunnerState) -> int | None:
    """``k`` when the runner's messages are ``conversation[k:]``, else ``None``."""
    conversation, messages = state.conversation, state.messages
    k = len(conversation) - len(messages)
    if not messages or k < 0:
        return None
    if all(a is b or a == b for a, b in zip(conversation[k:], messages, strict=True)):
        return k
    return None


def result_blocks(messages: Sequence[Message]) -> list[ToolResultBlock]:
    """The result blocks of ``messages``, in order (one per ``toolCalls`` record)."""
    return [
        block
        for message in messages
        if message.role == "user"
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


def _calls(messages: Sequence[Message]) -> dict[str, ToolUseBlock]:
    return {
        block.id: block
        for message in messages
        if message.role == "assistant"
        for block in message.content
        if isinstance(block, ToolUseBlock)
    }


def records_once(records: Sequence[ToolCallRecord], messages: Sequence[Message]) -> list[Json]:
    """The records' JSON without what their calls and results in ``messages`` hold.

    Record n pairs with the n-th result block and that block's call. When the records and the
    result blocks do not pair one to one (a run restored from a snapshot whose records another
    writer kept otherwise), or a record names another call, the records are written in full.
    """
    blocks = result_blocks(messages)
    paired = len(blocks) == len(records) and all(
        not record.tool_call_id or record.tool_call_id == block.tool_use_id
        for record, block in zip(records, blocks, strict=True)
    )
    if not paired:
        return [record_to_json(record) for record in records]
    calls = _calls(messages)
    return [
        record_to_json_once(record, calls.get(block.tool_use_id), block)
        for record, block in zip(records, blocks, strict=True)
    ]


def write_entry_once(out: Json, state: RunnerState) -> None:
    """Write the in-flight entry ``out`` (OMA's JSON of ``state``) with each output once."""
    k = messages_from(state)
    if k is not None:
        out["messages"] = []
        out[MESSAGES_FROM] = k
    if state.tool_calls:
        out["toolCalls"] = records_once(state.tool_calls, state.messages)


def restore_records(
    decoded: Sequence[ToolCallRecord], raw: Any, messages: Sequence[Message], where: str
) -> list[ToolCallRecord]:
    """``decoded`` (read from ``raw``, a ``toolCalls`` array) with what ``records_once`` left
    out put back.

    Raises:
        CheckpointError: a record leaves members out but the records and the result blocks of
            ``messages`` do not pair one to one, or its call is not in ``messages``.
    """
    items = raw if isinstance(raw, list) else []
    if all(isinstance(item, dict) and item.keys() >= _FULL for item in items):
        return list(decoded)
    blocks = result_blocks(messages)
    if len(blocks) != len(items):
        raise CheckpointError(
            f"{where}: tool call records leave members to their calls and results, but "
            f"{len(items)} records do not pair with {len(blocks)} result blocks"
        )
    calls = _calls(messages)
    return [
        record_from_json_once(item, calls.get(block.tool_use_id), block)
        for item, block in zip(items, blocks, strict=True)
    ]


_FULL = frozenset({"toolName", "input", "output"})


def written_once(raw: Json) -> bool:
    """Whether the stored snapshot ``raw`` may hold records written once: its ``journalRef``
    is durable (``writes_once``). OMA's form holds every record in full."""
    ref = raw.get("journalRef")
    return isinstance(ref, dict) and ref.get(DURABLE_MEMBER) is True


def rebuilds_records(raw: Json) -> bool:
    """Whether ``restore_records`` rebuilds every record of the validated entry ``raw`` from its
    ``toolCalls`` alone: some record leaves members out (``records_once``).

    Then the records ``runner_from_json`` would decode and pair with the conversation are
    thrown away by ``restore_entry``: a journal-first snapshot's 1000-turn entry spent about
    1.4 ms of a restore on them (P5). The validator checked each record's members
    (``checkpoint.validate``), so leaving them undecoded hides no error.
    """
    return any(not item.keys() >= _FULL for item in raw["toolCalls"])


def restore_entry(state: RunnerState, raw: Json, where: str) -> RunnerState:
    """A validated in-flight entry's state, its ``messages`` and records written once put back.

    Raises:
        CheckpointError: a record leaves out what cannot be put back.
    """
    k = raw.get(MESSAGES_FROM)
    if k is not None:  # the validator checked it is an index of the conversation
        state = replace(state, messages=state.conversation[k:])
    records = restore_records(state.tool_calls, raw.get("toolCalls"), state.messages, where)
    return replace(state, tool_calls=tuple(records))

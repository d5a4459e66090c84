"""A journal-first snapshot holds each tool output once (issue 19, item 5). No I/O.

OMA's in-flight entry says most of its conversation twice, and each tool output three times:
``messages`` (the runner's own messages) is, unless a context strategy rewrote the
conversation, the tail of ``conversationMessages`` after the prompt; and the ``output`` of each
``toolCalls`` record is the text of its result block in those messages (``after_tool_results``
appends the records and the message of their results together, in call order, so the n-th
record pairs with the n-th result block). A completed task's ``agentResult`` repeats its
records' outputs the same way.

A snapshot that depends on its journal (``journalRef.durable``, D15) is read only by us, with
its journal, so there each is written once: the entry's ``messages`` is ``[]`` with
``messagesFrom: k`` (``conversationMessages[k:]``), and a record whose output is its result's
text has no ``output`` member. ``decode`` puts both back (``restore_entry``,
``restore_outputs``), sharing the message objects. OMA's mode (and any snapshot without a
durable journal) writes OMA's form, every member in full.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors.checkpoint.journal_fields import is_journaled
from oma_actors.checkpoint.journal_ref import DURABLE_MEMBER
from oma_actors.domain.jsonforms import record_to_json
from oma_actors.domain.messages import ToolResultBlock, text_of
from oma_actors.errors import CheckpointError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.checkpoint.snapshot import CheckpointSnapshot
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.messages import Message
    from oma_actors.domain.results import ToolCallRecord

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


def drop_outputs(
    records: Sequence[ToolCallRecord], rendered: list[Json], messages: Sequence[Message]
) -> list[Json]:
    """``rendered`` (the records' JSON) without each ``output`` that is its result's text.

    Nothing is left out when the records and the result blocks do not pair one to one (a run
    restored from a snapshot whose records another writer kept otherwise).
    """
    blocks = result_blocks(messages)
    if len(blocks) != len(records):
        return rendered
    out = []
    for record, raw, block in zip(records, rendered, blocks, strict=True):
        same_call = not record.tool_call_id or record.tool_call_id == block.tool_use_id
        if same_call and record.output == text_of(block.content):
            raw = {key: value for key, value in raw.items() if key != "output"}
        out.append(raw)
    return out


def write_entry_once(out: Json, state: RunnerState) -> None:
    """Write the in-flight entry ``out`` (OMA's JSON of ``state``) with each output once."""
    k = messages_from(state)
    if k is not None:
        out["messages"] = []
        out[MESSAGES_FROM] = k
    if state.tool_calls:
        rendered = [record_to_json(record) for record in state.tool_calls]
        out["toolCalls"] = drop_outputs(state.tool_calls, rendered, state.messages)


def restore_outputs(
    records: Sequence[ToolCallRecord], raw: Any, messages: Sequence[Message], where: str
) -> list[ToolCallRecord]:
    """``records`` (decoded from ``raw``) with each output left out put back from its result.

    Raises:
        CheckpointError: an output is left out but the records and the result blocks of
            ``messages`` do not pair one to one.
    """
    missing = [
        index
        for index, item in enumerate(raw if isinstance(raw, list) else [])
        if isinstance(item, dict) and "output" not in item
    ]
    if not missing:
        return list(records)
    blocks = result_blocks(messages)
    if len(blocks) != len(records):
        raise CheckpointError(
            f"{where}: {len(missing)} tool call record(s) leave their output to their result, "
            f"but {len(records)} records do not pair with {len(blocks)} result blocks"
        )
    out = list(records)
    for index in missing:
        out[index] = replace(out[index], output=text_of(blocks[index].content))
    return out


def restore_entry(state: RunnerState, raw: Json, where: str) -> RunnerState:
    """A validated in-flight entry's state, its ``messages`` and outputs written once put back.

    Raises:
        CheckpointError: an output is left out that cannot be put back.
    """
    k = raw.get(MESSAGES_FROM)
    if k is not None:  # the validator checked it is an index of the conversation
        state = replace(state, messages=state.conversation[k:])
    records = restore_outputs(state.tool_calls, raw.get("toolCalls"), state.messages, where)
    return replace(state, tool_calls=tuple(records))

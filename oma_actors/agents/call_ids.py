"""Tool call ids unique in a task's transcript, whatever the model gives.

A tool call's id names one effect: ``ToolContext.idempotency_key`` is OMA's
``run:task:toolCallId`` (RN-09), a result is paired with its call by id, and a durable approval
of a call is derived from ``taskId:toolCallId``. Providers such as Anthropic and OpenAI issue
ids that never repeat, but not every model does: OpenAI-compatible servers omit them or number
each response's calls from ``0`` again, scripted models and custom adapters name every turn's
call alike. A repeated id gave two charges one idempotency key (a payment API deduplicating on
it would take the second for a retry of the first) and made a second gated call's approval
collide with the first's (``APPROVAL_CONFLICT``, the task failed).

So the loop gives a call whose id is empty, or already in the transcript or earlier in the same
response, a fresh ``call_<uuid>`` before anything sees the response; the id is recorded with
the answer, so a restore, the journal, the gates and the provider all see the same one.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.domain.messages import ContentBlock, LLMResponse, ToolUseBlock

if TYPE_CHECKING:
    from collections.abc import Iterable

    from oma_actors.domain.messages import Message


def transcript_call_ids(messages: Iterable[Message]) -> set[str]:
    """The ids of every tool call in ``messages``."""
    return {
        block.id
        for message in messages
        for block in message.content
        if isinstance(block, ToolUseBlock)
    }


def distinct_call_ids(response: LLMResponse, used: set[str]) -> LLMResponse:
    """``response`` with every tool call id unique among ``used`` (which each id joins).

    Args:
        response: the model's response, as its adapter returned it.
        used: the ids of the task's transcript so far; updated in place.

    Returns:
        ``response`` itself when every id was new, else a copy with fresh ids where needed.
    """
    content: list[ContentBlock] = []
    renamed = False
    for block in response.content:
        if isinstance(block, ToolUseBlock):
            if not block.id or block.id in used:
                block = replace(block, id=f"call_{uuid.uuid4().hex}")
                renamed = True
            used.add(block.id)
        content.append(block)
    return replace(response, content=content) if renamed else response

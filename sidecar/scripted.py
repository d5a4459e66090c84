"""The ``scripted`` provider from the wire: a deterministic offline model for tests and benchmarks.

The response to a model call is ``turns[k]`` where ``k`` counts the assistant messages already in
the conversation, among the turns whose ``when`` matches the conversation's first user message
(or, when none does, the turns without ``when``). The script therefore belongs to each
conversation: concurrent tasks of one agent do not steal each other's turns, a coordinator can
have one script for planning and one for synthesis, and a restored conversation continues at the
right turn. Past the end of the script the last turn repeats.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from oma_actors import TokenUsage
from oma_actors.llm import LLMResponse, ScriptedAdapter, TextBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.llm import ChatOptions, ContentBlock, Message
    from sidecar._pb.oma.v1 import sidecar_pb2 as pb

LAST_RESULT = "{{last_tool_result}}"
TASK = "{{task}}"


def _text(content: str | list[ContentBlock]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextBlock))


def _last_tool_result(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        for block in reversed(message.content):
            if isinstance(block, ToolResultBlock):
                return _text(block.content)
    return ""


def _first_user_text(messages: Sequence[Message]) -> str:
    for message in messages:
        if message.role == "user":
            return _text([block for block in message.content if isinstance(block, TextBlock)])
    return ""


def _task_line(messages: Sequence[Message]) -> str:
    for message in messages:
        if message.role == "user":
            for block in message.content:
                if isinstance(block, TextBlock) and block.text.strip():
                    return block.text.strip().splitlines()[0]
    return ""


def respond(script: pb.ScriptedModel, messages: Sequence[Message]) -> LLMResponse:
    """The scripted response to ``messages``."""
    turn_index = sum(1 for message in messages if message.role == "assistant")
    opening = _first_user_text(messages)
    turns = [turn for turn in script.turns if turn.when and turn.when in opening]
    if not turns:
        turns = [turn for turn in script.turns if not turn.when]
    if not turns:
        return LLMResponse([TextBlock("ok")], usage=TokenUsage(1, 1))
    turn = turns[min(turn_index, len(turns) - 1)]
    content: list[ContentBlock] = []
    text = turn.text
    if LAST_RESULT in text:
        text = text.replace(LAST_RESULT, _last_tool_result(messages))
    if TASK in text:
        text = text.replace(TASK, _task_line(messages))
    if text:
        content.append(TextBlock(text))
    for index, call in enumerate(turn.tool_calls):
        arguments = json.loads(call.input_json) if call.input_json else {}
        content.append(
            ToolUseBlock(call.id or f"toolu_{turn_index}_{index}", call.name, dict(arguments))
        )
    stop = "tool_use" if turn.tool_calls else "end_turn"
    return LLMResponse(content or [TextBlock("")], stop_reason=stop, usage=TokenUsage(1, 1))


def scripted_adapter(script: pb.ScriptedModel) -> ScriptedAdapter:
    """A ``ScriptedAdapter`` playing ``script`` (validated by ``convert.check_agent``)."""
    frozen = type(script)()
    frozen.CopyFrom(script)
    delay = frozen.delay.seconds + frozen.delay.nanos / 1e9

    def play(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        return respond(frozen, messages)

    return ScriptedAdapter(play, delay=delay)

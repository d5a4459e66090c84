"""Canned Chat Completions bodies and the adapter under test, shared by the OpenAI tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oma_actors.domain.messages import ChatOptions, Message, TextBlock
from oma_actors.llm import OpenAIAdapter

if TYPE_CHECKING:
    from fake_server import FakeServer

MODEL = "gpt-test"
OPTIONS = ChatOptions(model=MODEL)
HELLO = [Message("user", [TextBlock("hello")])]


def completion(
    message: dict[str, Any],
    *,
    finish_reason: str | None = "stop",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test-2099",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **message},
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def tool_call(id_: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


USAGE = {"prompt_tokens": 13, "completion_tokens": 5, "total_tokens": 18}
TEXT_REPLY = completion({"content": "hi there"}, usage=USAGE)
ERROR = {"error": {"message": "bad thing", "type": "invalid_request_error", "code": None}}


def adapter_for(fake_server: FakeServer) -> OpenAIAdapter:
    """The adapter every test talks to the fake server with: fast retries, a 5 s timeout."""
    return OpenAIAdapter(
        api_key="test-key",
        base_url=f"{fake_server.url}/v1",
        max_retries=2,
        retry_base_delay=0.001,
        timeout=5.0,
    )

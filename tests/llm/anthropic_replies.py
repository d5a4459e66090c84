"""Canned Messages API bodies and the adapter under test, shared by the Anthropic tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oma_actors.domain.messages import ChatOptions, Message, TextBlock
from oma_actors.llm import AnthropicAdapter

if TYPE_CHECKING:
    from fake_server import FakeServer

MODEL = "claude-test"
OPTIONS = ChatOptions(model=MODEL)
HELLO = [Message("user", [TextBlock("hello")])]


def reply_body(
    content: list[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    usage: dict[str, int] | None = None,
    model: str = "claude-test-20990101",
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 11, "output_tokens": 7},
    }


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


TEXT_REPLY = reply_body([{"type": "text", "text": "hi there"}])


def adapter_for(fake_server: FakeServer) -> AnthropicAdapter:
    """The adapter every test talks to the fake server with: fast retries, a 5 s timeout."""
    return AnthropicAdapter(
        api_key="test-key",
        base_url=fake_server.url,
        max_retries=2,
        retry_base_delay=0.001,
        timeout=5.0,
    )

"""Helpers for end-to-end tests that drive the public API on the scripted model."""

from __future__ import annotations

from oma_actors import LLMResponse, TextBlock, TokenUsage, ToolUseBlock


def answer(text: str, usage: tuple[int, int] = (1, 1)) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(*usage))


def calls(
    *items: tuple[str, str, dict[str, object]], usage: tuple[int, int] = (1, 1)
) -> LLMResponse:
    return LLMResponse(
        [ToolUseBlock(call_id, name, dict(args)) for call_id, name, args in items],
        stop_reason="tool_use",
        usage=TokenUsage(*usage),
    )

"""Helpers for end-to-end tests that drive the public API on the scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest

from oma_actors import Task, TeamRunResult, TokenUsage
from oma_actors.events import ProgressEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock


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


def titled(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    first = messages[0].content[0]
    title = getattr(first, "text", "").splitlines()[0].removeprefix("# Task: ")
    return answer(f"{title} output")


def two_tasks() -> list[Task]:
    return [
        Task("first", "do first", assignee="worker"),
        Task("second", "do second", assignee="worker", depends_on=["first"]),
    ]


async def run_until(
    start: Callable[[Callable[[ProgressEvent], None]], Awaitable[TeamRunResult]],
    stop_when: Callable[[ProgressEvent], bool],
) -> None:
    """Run until ``stop_when`` sees an event, then cancel the run (an abort, not a crash)."""
    holder: list[asyncio.Task[TeamRunResult]] = []

    def observe(event: ProgressEvent) -> None:
        if stop_when(event):
            holder[0].cancel()

    holder.append(asyncio.ensure_future(start(observe)))
    with pytest.raises(asyncio.CancelledError):
        await holder[0]

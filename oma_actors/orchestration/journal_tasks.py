"""What a run's journal holds of one task, and the small rules ``RunJournaling`` applies to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oma_actors.journal import vocabulary as v

if TYPE_CHECKING:
    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.messages import ChatOptions, ToolResultBlock, ToolUseBlock

Lineage = tuple[tuple[int, ...] | None, ...]


@dataclass(slots=True)
class TaskJournal:
    """What the journal already holds of one task's conversation."""

    agent: str
    lineage: list[Lineage] = field(default_factory=list)
    committed: set[str] = field(default_factory=set)  # call ids with a tool/result
    # call id -> its tool/call seq; None: an unsafe call an earlier attempt started (its
    # tool/call is that attempt's). A restore settles such a call without running it, so its
    # commit gets no tool/call of its own: the journal's fact that it did not run again.
    calls: dict[str, int | None] = field(default_factory=dict)
    # call id -> its tool/result seq and the block that event holds (what a journal-first
    # results message refers to instead of writing it again)
    results: dict[str, tuple[int, ToolResultBlock]] = field(default_factory=dict)
    answer: int | None = None  # the open round's assistant/message seq
    requested: dict[str, ToolUseBlock] = field(default_factory=dict)  # the open round's calls
    last_seq: int | None = None
    closed: int = 0  # the last turn known closed (turn/end recorded, or before a restore)
    request: int | None = None  # the llm/request seq its answer will name (JR-07)
    turn: int | None = None  # the turn that request opened
    model: str | None = None
    # Requested before the run saw any boundary of it (its first turn): kept across saves.
    pinned: bool = False
    # Journal-first: the state its conversation's first request sent, and its prompt's seq
    # (``RunJournaling.opened``: used while the run holds no boundary of the task).
    opened: tuple[RunnerState, int] | None = None


class OptionsHashes:
    """``systemPromptHash`` and ``toolsHash`` of a runner's options, computed once per options."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[ChatOptions, str | None, str | None]] = {}

    def __call__(self, options: ChatOptions) -> tuple[str | None, str | None]:
        """The two hashes (``None`` without a system prompt or tools)."""
        cached = self._cache.get(id(options))
        if cached is not None and cached[0] is options:
            return cached[1], cached[2]
        system = options.system_prompt
        system_hash = v.canonical_content_hash(system) if system else None
        tools = [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in options.tools
        ]
        tools_hash = v.canonical_content_hash(tools) if tools else None
        self._cache[id(options)] = (options, system_hash, tools_hash)
        return system_hash, tools_hash


def unknown_lineage(state: RunnerState) -> list[Lineage]:
    """Lineage of messages recorded before the journal (none is known)."""
    return [tuple(None for _ in message.content) for message in state.conversation]

"""The demo: an offline research team (three agents, five dependent tasks, file-writing tools).

The scripted model plays each agent deterministically: it searches a small built-in corpus,
writes notes under the demo folder, and answers from what its tools returned.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import aiofiles
import aiofiles.os
from pydantic import BaseModel, Field

from oma_actors import (
    AgentConfig,
    Task,
    Team,
    TokenUsage,
    Tool,
    ToolContext,
    ToolResult,
    define_tool,
)
from oma_actors.llm import (
    ChatOptions,
    ContentBlock,
    LLMResponse,
    Message,
    ScriptedAdapter,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

CORPUS = {
    "checkpoint": "A checkpoint is a handover note: the latest state from which a run continues.",
    "idempotency": (
        "Tools receive run_id:task_id:tool_call_id as an idempotency key across restores."
    ),
    "actor": "An actor owns private state and a mailbox; it handles one message at a time.",
    "fsync": "Atomic file writes go temp file, fsync, rename, then fsync the directory.",
    "approval": "A durable approval binds the reviewed content by a SHA-256 request hash.",
}


class SearchInput(BaseModel):
    """Input of ``search_corpus``."""

    query: str = Field(description="one keyword to look up")


class WriteInput(BaseModel):
    """Input of ``write_note``."""

    filename: str = Field(description="a file name such as findings.md (no folders)")
    content: str = Field(description="the text to write")


AfterWrite = Callable[[str], Awaitable[None]]

NOTE_SUFFIXES = (".md", ".txt")
"""What a note's file name ends with: ``write_note`` writes nothing else into the folder."""


def make_tools(out_dir: Path, after_write: AfterWrite | None = None) -> tuple[Tool, Tool]:
    """The demo's two tools: a corpus search and a note writer confined to ``out_dir``.

    ``after_write(filename)`` runs after a note is on disk and before the tool returns (the
    crash demo uses it to die between a tool's effect and its commit).
    """

    async def search(args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, SearchInput)
        hits = [text for key, text in CORPUS.items() if args.query.lower() in key]
        if not hits:
            return ToolResult(f"no entry for {args.query!r}", is_error=True)
        return ToolResult(" ".join(hits))

    async def write(args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, WriteInput)
        name = os.path.basename(args.filename)
        if not name or name != args.filename:
            return ToolResult(
                f"refused: {args.filename!r} must be a plain file name", is_error=True
            )
        if name.startswith(".") or not name.endswith(NOTE_SUFFIXES):
            # A live model picks the names: never the demo's own files (its state.json, the
            # journal, the marker, the timeline page), which a note would overwrite mid-run.
            return ToolResult(
                f"refused: {name!r} is no note name (a .md or .txt file)", is_error=True
            )
        await aiofiles.os.makedirs(out_dir, exist_ok=True)
        async with aiofiles.open(out_dir / name, "w", encoding="utf-8") as handle:
            await handle.write(args.content + "\n")
        if after_write is not None:
            await after_write(name)
        return ToolResult(f"wrote {len(args.content)} characters to {name} ({ctx.idempotency_key})")

    return (
        define_tool(
            name="search_corpus",
            description="Look up a keyword in the research corpus.",
            input_model=SearchInput,
            execute=search,
        ),
        define_tool(
            name="write_note",
            description="Write a note file into the demo folder.",
            input_model=WriteInput,
            execute=write,
        ),
    )


# Each task's turns: the calls of one model turn run in parallel; after the last turn, the answer.
Step = tuple[str, str]  # ("search", keyword) or ("write", filename)
PLAYBOOK: dict[str, tuple[tuple[Step, ...], ...]] = {
    "Survey checkpointing": (
        (("search", "checkpoint"),),
        (("search", "fsync"),),
        (("write", "survey.md"),),
    ),
    "Survey tool safety": ((("search", "idempotency"),), (("write", "tools.md"),)),
    "Survey actors": ((("search", "actor"),), (("write", "actors.md"),)),
    "Analyse findings": ((("search", "approval"), ("write", "analysis.md")),),
    "Write the brief": ((("write", "brief.md"),),),
}


def demo_tasks() -> list[Task]:
    """Five tasks: three surveys in parallel, an analysis of them, then the brief."""
    return [
        Task("Survey checkpointing", "Find how runs survive crashes.", assignee="researcher"),
        Task(
            "Survey tool safety",
            "Find how tool calls avoid repeating effects.",
            assignee="researcher",
        ),
        Task("Survey actors", "Find how actors structure concurrent work.", assignee="analyst"),
        Task(
            "Analyse findings",
            "Compare the three surveys and list the key ideas.",
            assignee="analyst",
            depends_on=["Survey checkpointing", "Survey tool safety", "Survey actors"],
        ),
        Task(
            "Write the brief",
            "Write a one-page brief for engineers from the analysis.",
            assignee="writer",
            depends_on=["Analyse findings"],
        ),
    ]


def text_of(content: str | list[ContentBlock]) -> str:
    """The text of a message's or a tool result's content (its text blocks, joined)."""
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextBlock))


def scripted_brain(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Play any demo agent from the playbook; a pure function of the conversation.

    Being pure is what lets a restored run continue exactly: the next response depends only on
    what the conversation already holds, never on how many calls this process has made.
    """
    prompt = text_of(messages[0].content)
    title = prompt.splitlines()[0].removeprefix("# Task: ").strip()
    turns = PLAYBOOK.get(title, ())
    turn = sum(1 for message in messages if message.role == "assistant")
    usage = TokenUsage(40 + 10 * turn, 25)
    findings = [
        text_of(block.content)
        for message in messages
        for block in message.content
        if isinstance(block, ToolResultBlock) and not block.is_error
    ]
    facts = [item for item in findings if not item.startswith("wrote ")]
    context = prompt.split("## Context from prerequisite tasks", 1)[-1].strip()
    if "## Context" not in prompt:
        context = ""
    if turn < len(turns):
        slug = title.split()[0].lower()
        calls: list[ContentBlock] = []
        for index, (kind, arg) in enumerate(turns[turn]):
            call_id = f"call-{slug}-{turn}-{index}"
            if kind == "search":
                calls.append(ToolUseBlock(call_id, "search_corpus", {"query": arg}))
            else:
                body = "\n".join(f"- {fact}" for fact in facts) or context
                content = f"# {title}\n\n{body}".strip()
                calls.append(
                    ToolUseBlock(call_id, "write_note", {"filename": arg, "content": content})
                )
        return LLMResponse(calls, stop_reason="tool_use", usage=usage)
    answer = "\n".join(part for part in (context, " ".join(facts)) if part) or f"{title}: done."
    return LLMResponse([TextBlock(answer)], usage=usage)


def demo_team(
    out_dir: Path,
    *,
    provider: str | None = None,
    model: str = "",
    after_write: AfterWrite | None = None,
) -> Team:
    """The research team, on the scripted brain unless a live ``provider`` is named.

    Args:
        out_dir: the folder the ``write_note`` tool writes into.
        provider: ``"anthropic"`` or ``"openai"`` for a live run; ``None`` plays the scripted
            brain offline.
        model: the provider's model name (live runs only).
        after_write: called after each note is on disk, before the tool returns.
    """
    tools = make_tools(out_dir, after_write)
    adapter = None if provider is not None else ScriptedAdapter(scripted_brain, delay=0.05)
    roles = {
        "researcher": "You research topics with search_corpus and record findings with write_note.",
        "analyst": "You compare findings and record an analysis with write_note.",
        "writer": "You write clear briefs for engineers and save them with write_note.",
    }
    return Team(
        "research",
        [
            AgentConfig(
                name,
                model=model,
                provider=provider,
                adapter=adapter,
                system_prompt=role,
                tools=tools,
                max_turns=6,
            )
            for name, role in roles.items()
        ],
        shared_memory=True,
    )

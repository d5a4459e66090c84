"""The demo: an offline research team (three agents, five dependent tasks, file-writing tools).

The scripted model plays each agent deterministically: it searches a small built-in corpus,
writes notes under the demo folder, and answers from what its tools returned.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import aiofiles
import aiofiles.os
from pydantic import BaseModel, Field

from oma_actors.agents.config import AgentConfig, Team
from oma_actors.domain.messages import (
    ChatOptions,
    LLMResponse,
    Message,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
    text_of,
)
from oma_actors.domain.tasks import Task
from oma_actors.testing.scripted import ScriptedAdapter
from oma_actors.tools.base import Tool, ToolContext, ToolResult, define_tool

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from oma_actors.llm.base import LLMAdapter

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


def make_tools(out_dir: Path) -> tuple[Tool, Tool]:
    """The demo's two tools: a corpus search and a note writer confined to ``out_dir``."""

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
        await aiofiles.os.makedirs(out_dir, exist_ok=True)
        async with aiofiles.open(out_dir / name, "w", encoding="utf-8") as handle:
            await handle.write(args.content + "\n")
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


# title -> (keywords to search, file to write); the final answer quotes what the tools returned.
PLAYBOOK: dict[str, tuple[Sequence[str], str]] = {
    "Survey checkpointing": (("checkpoint", "fsync"), "survey.md"),
    "Survey tool safety": (("idempotency",), "tools.md"),
    "Survey actors": (("actor",), "actors.md"),
    "Analyse findings": ((), "analysis.md"),
    "Write the brief": (("approval",), "brief.md"),
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


def scripted_brain(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Play any demo agent: search each keyword, write the note, then answer."""
    prompt = text_of(messages[0].content)
    title = prompt.splitlines()[0].removeprefix("# Task: ").strip()
    keywords, filename = PLAYBOOK.get(title, ((), "notes.md"))
    turn = sum(1 for message in messages if message.role == "assistant")
    usage = TokenUsage(40 + 10 * turn, 25)
    findings = [
        text_of(block.content)
        for message in messages
        for block in message.content
        if isinstance(block, ToolResultBlock) and not block.is_error
    ]
    if turn < len(keywords):
        call = ToolUseBlock(
            f"call-{title[:6].lower()}-{turn}", "search_corpus", {"query": keywords[turn]}
        )
        return LLMResponse([call], stop_reason="tool_use", usage=usage)
    if turn == len(keywords):
        context = "\n".join(prompt.splitlines()[1:]).strip()
        body = "\n".join(f"- {item}" for item in findings) or context[:400]
        call = ToolUseBlock(
            f"call-{title[:6].lower()}-write",
            "write_note",
            {"filename": filename, "content": f"# {title}\n\n{body}"},
        )
        return LLMResponse(
            [TextBlock("Writing the note."), call], stop_reason="tool_use", usage=usage
        )
    searched = [item for item in findings if not item.startswith("wrote ")]
    summary = " ".join(searched) or f"{title}: done, see {filename}."
    return LLMResponse([TextBlock(summary)], usage=usage)


def demo_team(out_dir: Path, *, live_adapter: LLMAdapter | None = None, model: str = "") -> Team:
    """The research team, on the scripted brain unless a live adapter is given."""
    tools = make_tools(out_dir)
    adapter = live_adapter or ScriptedAdapter(scripted_brain, delay=0.05)
    roles = {
        "researcher": "You research topics with search_corpus and record findings with write_note.",
        "analyst": "You compare findings and record an analysis with write_note.",
        "writer": "You write clear briefs for engineers and save them with write_note.",
    }
    return Team(
        "research",
        [
            AgentConfig(
                name, model=model, adapter=adapter, system_prompt=role, tools=tools, max_turns=6
            )
            for name, role in roles.items()
        ],
        shared_memory=True,
    )


def describe_tool_input(value: object) -> str:
    """Short JSON for display."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."

"""A run checkpointed through a ``RedactingStore``: each save is serialized once, redacted as the
codec encodes it, and holds exactly what redacting the plain snapshot text would hold.

The codec redacts each message as it first encodes it (``EncodeCache(redactor)``) and hands the
store a text marked with the store's own redactor, which the store writes as it is. The checks:
at every save of a real run (messages reused between saves from the cache), the text equals
``redact(encode(snapshot))``; no snapshot text reaches the store's own parse-and-redact; a
text marked by another store's redactor is redacted again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.checkpoint import codec, run_writer
from oma_actors.checkpoint.fragments import EncodeCache, EncodedText
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore, InMemoryStore, RedactingStore
from oma_actors.stores.redacting import redactor_of
from oma_actors.stores.redaction import Redactor, redact
from oma_actors.testing import ScriptedAdapter

PATTERNS = [r"\b\d{3}-\d{4}\b"]
OUTPUTS = [
    "password=hunter2 and the rest",
    '{"apiKey": "abc", "note": "call 555-1234"}',
    "Authorization: Bearer abcdefghijkl",
    "lone \ud800 surrogate and sk-abcdefghijklmnopqrs",
    "x" * 3000,
]


class Fetch(BaseModel):
    i: int


def team() -> Team:
    async def fetch(args: Fetch, ctx: ToolContext) -> str:
        return OUTPUTS[args.i % len(OUTPUTS)]

    tool = define_tool(name="fetch", description="f", input_model=Fetch, execute=fetch)

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        n = sum(1 for m in messages if m.role == "assistant")
        if n < 2 * len(OUTPUTS):
            call = ToolUseBlock(f"c{n}", "fetch", {"i": n})
            return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(3, 2))
        return LLMResponse([TextBlock("token: secret-ish done")], usage=TokenUsage(1, 1))

    return Team(
        "t", [AgentConfig("w", adapter=ScriptedAdapter(script), tools=[tool], max_turns=20)]
    )


async def test_every_save_is_the_plain_text_redacted_and_serialized_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts: list[str] = []
    wrong: list[str] = []  # collected, not asserted in the run's actor: checked after it
    real_encode = codec.encode

    def checked_encode(snapshot: Any, cache: EncodeCache | None = None) -> Any:
        text = real_encode(snapshot, cache)
        if cache is None or cache.redactor is None:
            wrong.append("encoded without the store's redactor")
        elif text != redact(real_encode(snapshot), PATTERNS):
            wrong.append(f"save {len(texts)} differs from the plain text redacted")
        elif text.json_literal() != json.dumps(str(text), ensure_ascii=False):
            wrong.append(f"save {len(texts)}'s literal differs from its text escaped")
        texts.append(text)
        return text

    reparsed: list[object] = []
    real_redact = RedactingStore._redact

    def counted(self: RedactingStore, value: str) -> str:
        reparsed.append(value)
        return real_redact(self, value)

    monkeypatch.setattr(run_writer, "encode", checked_encode)
    monkeypatch.setattr(RedactingStore, "_redact", counted)
    async with FileStore.open(tmp_path / "state.json") as inner:
        store = RedactingStore(inner, patterns=PATTERNS)
        result = await OpenMultiAgent().run_tasks(
            team(),
            [Task("t", "fetch", id="t1", assignee="w")],
            checkpoint=CheckpointOptions(store=store, run_id="r1"),
        )
        assert result.success
        raw = (tmp_path / "state.json").read_text()
    assert wrong == []
    assert len(texts) >= 10  # every boundary of the run was checked
    assert not [v for v in reparsed if isinstance(v, EncodedText)]  # none parsed again
    for secret in ("hunter2", "555-1234", "abcdefghijkl", "sk-abcdefghijklmnopqrs"):
        assert secret not in raw


async def test_a_text_marked_by_another_stores_rules_is_redacted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inner = InMemoryStore()
    lenient = RedactingStore(InMemoryStore())
    strict = RedactingStore(inner, patterns=PATTERNS)
    text = codec.encode(
        await _a_snapshot_holding("555-1234", monkeypatch), EncodeCache(redactor_of(lenient))
    )
    assert "555-1234" in text
    assert text.redacted_by() is redactor_of(lenient)
    await strict.set("k", text)
    entry = await inner.get("k")
    assert entry is not None
    assert "555-1234" not in entry.value


def test_only_a_redacting_store_has_a_redactor() -> None:
    assert isinstance(redactor_of(RedactingStore(InMemoryStore())), Redactor)
    assert redactor_of(InMemoryStore()) is None


async def _a_snapshot_holding(needle: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A snapshot a plain run saved whose text holds ``needle``."""
    seen: list[Any] = []
    real_encode = codec.encode

    def keep(snapshot: Any, cache: EncodeCache | None = None) -> Any:
        text = real_encode(snapshot, cache)
        if needle in text:
            seen.append(snapshot)
        return text

    monkeypatch.setattr(run_writer, "encode", keep)
    await OpenMultiAgent().run_tasks(
        team(),
        [Task("t", "fetch", id="t1", assignee="w")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r1"),
    )
    monkeypatch.undo()
    assert seen
    return seen[-1]

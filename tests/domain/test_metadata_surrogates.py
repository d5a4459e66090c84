"""Task metadata holding a lone surrogate (``"\\ud800"``): a JSON value, as OMA takes it.

JavaScript strings may hold one, and ``JSON.stringify`` writes it as a six-character escape; OMA's
``validateTaskMetadata`` accepts it. So do we: the snapshot and journal texts escape it, and the
size bound counts the escape. Before, ``Task(metadata=...)`` raised a bare ``UnicodeEncodeError``
instead of accepting it or refusing it with a ``TaskGraphError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    TaskGraphError,
    Team,
    TokenUsage,
)
from oma_actors.checkpoint import Checkpoint
from oma_actors.domain.metadata import MAX_BYTES
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from pathlib import Path

LONE = {"note": "a\ud800b", "tags": ["\udfff"], "nested": {"k\udc00": "v"}}


def test_a_lone_surrogate_is_a_json_value() -> None:
    task = Task("a", "d", id="t-1", metadata=LONE)
    assert task.metadata == LONE


def test_the_size_counts_a_lone_surrogate_as_its_escape() -> None:
    # JSON.stringify writes each as "\udXXX": six bytes, where "é" takes two.
    empty = len('{"k":""}')
    fits = "\ud800" * ((MAX_BYTES - empty) // 6)
    Task("a", "d", metadata={"k": fits})
    over = fits + "\ud800"
    with pytest.raises(TaskGraphError) as caught:
        Task("a", "d", id="t-1", metadata={"k": over})
    size = empty + 6 * len(over)
    assert f"task 't-1': metadata is {size} bytes of JSON" in str(caught.value)
    assert caught.value.tasks == ("t-1",)


async def test_a_run_keeps_it_in_its_snapshot_and_journal(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "state.json")
    journal = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0)
    agent = AgentConfig(
        "w",
        adapter=ScriptedAdapter(
            lambda messages, options: LLMResponse([TextBlock("ok")], usage=TokenUsage(1, 1))
        ),
    )
    try:
        result = await OpenMultiAgent().run_tasks(
            Team("t", [agent]),
            [Task("a", "d", id="t-1", assignee="w", metadata=LONE)],
            checkpoint=CheckpointOptions(store=store, run_id="r"),
            journal=JournalOptions(journal),
        )
        snapshot = await Checkpoint(store, run_id="r").load_latest()
    finally:
        await journal.close()
        await store.aclose()
    assert result.success, result.status
    assert result.status.message is None
    [task] = result.tasks
    assert dict(task.metadata or {}) == LONE
    assert snapshot is not None
    [saved] = snapshot.tasks
    assert dict(saved.metadata or {}) == LONE
    # Escaped in the snapshot's text (itself a JSON string in the file: escaped once more).
    assert "a\\\\ud800b" in (tmp_path / "state.json").read_bytes().decode()

"""A deterministic scripted team for history and fork tests, with a ledger of tool effects.

Each agent answers turn ``n`` with ``calls`` calls of the tool ``note`` (ids ``c<n>-<i>``) until
``turns`` turns are done, then with ``"done"``. Every execution of ``note`` appends its tool
call id, and the run it ran in, to ``effects``: a re-run shows up as a repeated id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from note_team import note_team

from oma_actors import (
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
)
from oma_actors.checkpoint.codec import encode
from oma_actors.domain.snapshot import CheckpointSnapshot
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.stores import FileStore, InMemoryStore


@dataclass
class Effects:
    """Every execution of the tool: ``(run_id, tool_call_id)``, in order."""

    calls: list[tuple[str | None, str]] = field(default_factory=list)

    def of(self, run_id: str) -> list[str]:
        return [call for run, call in self.calls if run == run_id]


def make_team(
    turns: int, calls: int, effect: str, effects: Effects, *, agents: Sequence[str] = ("w", "v")
) -> Team:
    return note_team(
        turns, calls, effect,
        lambda ctx: effects.calls.append((ctx.run_id, ctx.tool_call_id or "")),
        agents=agents,
    )  # fmt: skip


def tasks(count: int) -> list[Task]:
    return [Task(f"task {i}", "x", assignee=("w", "v")[i], id=f"t{i}") for i in range(count)]


@dataclass
class Workspace:
    """A FileStore and a JSONL journal in one directory."""

    root: Path

    @property
    def store_path(self) -> Path:
        return self.root / "state.json"

    @property
    def journal_path(self) -> Path:
        return self.root / "run.jsonl"

    def store(self) -> FileStore:
        return FileStore(self.store_path)

    def journal(self) -> JsonlRunJournal:
        return JsonlRunJournal(self.journal_path, flush_interval_ms=0)

    def entries(self, prefix: str) -> dict[str, Any]:
        """The stored entries whose key contains ``prefix``, as the file holds them."""
        raw = json.loads(self.store_path.read_text())
        items = raw.get("entries", raw) if isinstance(raw, dict) else raw
        return {key: value for key, value in _pairs(items) if prefix in key}

    def journal_lines(self, run_id: str) -> list[str]:
        return [
            line
            for line in self.journal_path.read_text().splitlines()
            if json.loads(line).get("runId") == run_id
        ]


def _pairs(items: Any) -> list[tuple[str, Any]]:
    if isinstance(items, dict):
        return [(str(key), value) for key, value in items.items()]
    return [(str(item.get("key")), item) for item in items]


@dataclass
class MemoryWorkspace(Workspace):
    """A memory store (one instance: it is the store) and a JSONL journal: a store where an
    anchor costs only its bytes, so every compaction keeps one (D17), size-only ones too."""

    kept: InMemoryStore = field(default_factory=InMemoryStore)

    def store(self) -> InMemoryStore:  # type: ignore[override]
        return self.kept


async def run_journal_first(
    space: Workspace, team: Team, count: int, *, run_id: str = "r1", **kwargs: Any
) -> TeamRunResult:
    journal = space.journal()
    try:
        return await OpenMultiAgent(**kwargs).run_tasks(
            team, tasks(count),
            checkpoint=CheckpointOptions(store=space.store(), run_id=run_id),
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
    finally:
        await journal.close()


async def restore_run(space: Workspace, team: Team, run_id: str, **kwargs: Any) -> TeamRunResult:
    journal = space.journal()
    try:
        return await OpenMultiAgent(**kwargs).restore(
            team,
            checkpoint=CheckpointOptions(store=space.store(), run_id=run_id),
            journal=JournalOptions(journal, durable=True),
        )
    finally:
        await journal.close()


IGNORED_ROOT = ("revision", "createdAt")
"""What a boundary's saved snapshot and ``state_at`` may differ in: the save counter (the
fold cannot know how many saves came before a journal-only boundary) and the save time."""


def comparable(snapshot: CheckpointSnapshot) -> dict[str, Any]:
    """The stored JSON of ``snapshot`` less ``IGNORED_ROOT``, ``journalRef.through`` and the
    pending calls' ``dispatched``.

    ``dispatched`` is the runner's mark on an ``unsafe`` tool's call; the journal holds the call
    but not its tool's effect, so ``state_at`` (which has no team) cannot set it. A restore adds
    it from the team (``mark_started_unsafe``) and ``fork_run`` marks every open call.
    """
    raw: dict[str, Any] = json.loads(encode(snapshot))
    for key in IGNORED_ROOT:
        raw.pop(key, None)
    # journalRef.through is the writer's note of how far the journal held the run when it
    # compacted (D15): save bookkeeping, like the revision, not state a fold rebuilds.
    if isinstance(raw.get("journalRef"), dict):
        raw["journalRef"].pop("through", None)
    for entry in raw.get("inFlightTasks", []):
        for call in entry.get("pendingToolCalls", []):
            call.pop("dispatched", None)
    return raw

"""The in-process side of the fault rows (crash-matrix.md 3.4): a run, its ledgers and its store.

The fault tests run in the test's own process on the same scenario builders as the crash
children (``crash_scenarios``), so the model, the tool ledger and the results are those of the
real-process tests. ``AtBoundary`` picks the store write a fault hits by the boundary it saves,
not by parsing the snapshot it writes, so a row does not depend on the snapshot's format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crash_ledger import EFFECTS, MODEL_CALLS, read_jsonl
from crash_scenarios import CHECKPOINT_KEY, RUN_ID, STORE_FILE, build_team, tasks_for
from crash_tool import ToolBehaviour

from oma_actors import CheckpointOptions, OpenMultiAgent, Task, TeamRunResult
from oma_actors.checkpoint.boundaries import BoundaryPoint, probing
from oma_actors.events import ProgressEvent
from oma_actors.stores import MemoryEntry


class AtBoundary:
    """Selects the checkpoint write of one named boundary, for a fault store's ``predicate``.

    Its probe arms it at the boundary's ``before`` report and disarms it at the ``after``
    report; the first watched store call in between is that boundary's write (the writer writes
    right after reporting). Install it with ``watching()`` around the run.

    Attributes:
        boundary: the boundary whose write is selected.
        task_id: only that task's reports arm it (``None``: any).
        hits: how many writes were selected.
    """

    def __init__(self, boundary: str, task_id: str | None = None) -> None:
        self.boundary = boundary
        self.task_id = task_id
        self.hits = 0
        self._armed = False

    def probe(self, point: BoundaryPoint) -> None:
        """Arm at the boundary's ``before`` report, disarm at any ``after``."""
        if point.phase == "after":
            self._armed = False
        elif point.boundary == self.boundary and self.task_id in (None, point.task_id):
            self._armed = True

    def predicate(self, key: str, value: Any) -> bool:
        """Whether this store call is the armed boundary's write (at most one per arming)."""
        if not self._armed:
            return False
        self._armed = False
        self.hits += 1
        return True

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Install the probe for the runs started inside this block."""
        with probing(self.probe):
            yield


class Recorder:
    """A store wrapper that records every checkpoint write that reached the inner store."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.set_calls = 0
        self.values: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0

    async def get(self, key: str) -> MemoryEntry | None:
        entry: MemoryEntry | None = await self.inner.get(key)
        return entry

    async def set(self, key: str, value: str, metadata: Any = None) -> None:
        self.set_calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await self.pause(json.loads(value))
            await self.inner.set(key, value, metadata)
        finally:
            self.active -= 1
        self.values.append(json.loads(value))

    async def pause(self, snapshot: dict[str, Any]) -> None:
        """Hook for subclasses: delay a write before it reaches the inner store."""

    async def list(self) -> list[MemoryEntry]:
        entries: list[MemoryEntry] = await self.inner.list()
        return entries

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def clear(self) -> None:
        await self.inner.clear()


class Harness:
    """One in-process run of a scenario, with its ledger and events."""

    def __init__(self, tmp_path: Path, scenario: str = "chain", mode: str = "default") -> None:
        self.tmp_path = tmp_path
        self.scenario = scenario
        self.mode = mode
        self.ledger = tmp_path / "ledger"
        self.ledger.mkdir(exist_ok=True)
        self.path = tmp_path / "state" / STORE_FILE
        self.events: list[ProgressEvent] = []

    def team(self, behaviour: ToolBehaviour | None = None) -> Any:
        team, _ = build_team(self.scenario, self.ledger, behaviour or ToolBehaviour(mode=self.mode))
        return team

    def orchestrator(self) -> OpenMultiAgent:
        return OpenMultiAgent(on_progress=self.events.append, max_concurrency=1)

    async def run(
        self, store: Any, *, tasks: list[Task] | None = None, behaviour: ToolBehaviour | None = None
    ) -> TeamRunResult:
        return await self.orchestrator().run_tasks(
            self.team(behaviour),
            tasks if tasks is not None else tasks_for(self.scenario),
            checkpoint=CheckpointOptions(store=store, run_id=RUN_ID),
        )

    async def restore(self, store: Any, *, tasks: list[Task] | None = None) -> TeamRunResult:
        return await self.orchestrator().restore(
            self.team(), tasks, checkpoint=CheckpointOptions(store=store, run_id=RUN_ID)
        )

    def calls(self) -> list[dict[str, Any]]:
        return read_jsonl(self.ledger / MODEL_CALLS)

    def effects(self) -> list[dict[str, Any]]:
        return read_jsonl(self.ledger / EFFECTS)

    def of(self, kind: type[ProgressEvent]) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]


def write_store_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def edit_checkpoint(data: bytes, edit: Any) -> bytes:
    """Apply ``edit(snapshot)`` to the checkpoint inside FileStore bytes."""
    document = json.loads(data)
    for entry in document["entries"]:
        if entry["key"] == CHECKPOINT_KEY:
            snapshot = json.loads(entry["value"])
            edit(snapshot)
            entry["value"] = json.dumps(snapshot)
    return json.dumps(document).encode()

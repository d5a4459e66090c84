"""A journal-only save builds no whole snapshot; a compaction builds one and writes it whole.

Issue 19 (P1): at a journal-first boundary the writer appends the boundary's events and needs
only the run's watermark and its calls in flight; building the v5 snapshot there (every task,
entry and result copied into frozen values) was CPU spent for nothing. These tests run real
journal-first runs and count, save by save, how often the writer asked for the snapshot
(``RunAtBoundary.build``): never at a journal-only save, once at each compaction, and what a
compaction writes is the whole snapshot of the run at that boundary.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from test_journal_durable import WORKLOADS, as_written, team

from oma_actors import CheckpointOptions, OpenMultiAgent, Task
from oma_actors.checkpoint import RunWriter
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.run_writer import Saved
from oma_actors.domain.snapshot import CheckpointSnapshot
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.stores import FileStore


@dataclass
class Save:
    boundary: str
    mode: str | None  # "journal" / "snapshot" when durable
    builds: int
    built: CheckpointSnapshot | None  # the last snapshot the writer had built
    stored: str | None  # the store's latest snapshot right after a durable compaction
    watermark: int | None  # the boundary's, as the run reported it to the writer


async def run_counting(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Save], list[ProgressEvent]]:
    """Run the workload ``name`` journal-first; each save with the builds it asked for."""
    store_path, journal_path = tmp_path / "state.json", tmp_path / "run.jsonl"
    saves: list[Save] = []
    original = RunWriter.save_run

    async def counting(self: RunWriter, run: RunAtBoundary, **kw: Any) -> Any:
        built: list[CheckpointSnapshot] = []

        async def build() -> CheckpointSnapshot:
            built.append(await run.build())
            return built[-1]

        before = self.journal_saves
        outcome = await original(self, replace(run, build=build), **kw)
        mode = None
        stored = None
        if isinstance(outcome, Saved):
            mode = "journal" if self.journal_saves > before else "snapshot"
            if mode == "snapshot":
                entry = await FileStore(store_path).get(self.checkpoint.key)
                assert entry is not None
                stored = entry.value
        last = built[-1] if built else None
        saves.append(Save(kw["boundary"], mode, len(built), last, stored, run.watermark))
        return outcome

    monkeypatch.setattr(RunWriter, "save_run", counting)
    work = WORKLOADS[name]
    events: list[ProgressEvent] = []
    the_team = team(work.turns, work.calls, work.effect, [])
    tasks = [Task(f"task {i}", "x", assignee=("w", "v")[i], id=f"t{i}") for i in range(work.tasks)]
    journal = JsonlRunJournal(journal_path, flush_interval_ms=0)
    try:
        result = await OpenMultiAgent(on_progress=events.append).run_tasks(
            the_team, tasks, checkpoint=CheckpointOptions(store=FileStore(store_path), run_id="d1"),
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
    finally:
        await journal.close()
    assert result.success
    return saves, events


@pytest.mark.parametrize("name", ["one_call_per_turn", "unsafe_tool", "two_tasks_one_journal"])
async def test_a_journal_only_save_builds_no_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    saves, events = await run_counting(tmp_path, name, monkeypatch)
    builds = Counter((save.mode, save.builds) for save in saves)
    journal_only = sum(n for (mode, _), n in builds.items() if mode == "journal")
    # The run makes journal-only saves (tool_dispatch ones with their marks, when unsafe) ...
    assert journal_only >= 2 * WORKLOADS[name].turns, builds
    # ... and none of them built the snapshot; every compaction built it exactly once.
    assert builds == {("journal", 0): journal_only, ("snapshot", 1): len(saves) - journal_only}
    modes = Counter(e.mode for e in events if isinstance(e, CheckpointSaved))
    assert modes == {"journal": journal_only, "snapshot": len(saves) - journal_only}


async def test_a_compaction_writes_the_whole_snapshot_of_its_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run compacts at its admission, at each completion and at its end, with journal-only
    # saves in between: what each compaction writes is the whole run as it was there.
    saves, _ = await run_counting(tmp_path, "two_tasks_one_journal", monkeypatch)
    compactions = [save for save in saves if save.mode == "snapshot"]
    assert {save.boundary for save in compactions} >= {"admission", "task_completed"}
    assert any(save.mode == "journal" for save in saves[: saves.index(compactions[-1])])
    previous = -1
    for save in compactions:
        assert save.built is not None
        assert save.stored is not None
        stored = json.loads(save.stored)
        # The built snapshot, as the writer stamped it: the revision and how far the journal
        # held the run (journalRef.through) are the writer's; the rest is the run's, as built.
        assert stored["journalWatermarkSeq"] == save.watermark
        assert stored["journalWatermarkSeq"] > previous  # each at its own boundary, in order
        previous = stored["journalWatermarkSeq"]
        assert stored["revision"] > 0
        assert as_written(save.built) == without_stamps(stored), save.boundary
    final = json.loads(compactions[-1].stored or "")
    assert [task["status"] for task in final["queue"]["tasks"]] == ["completed", "completed"]
    assert len(final["completedTaskResults"]) == 2


def without_stamps(raw: dict[str, Any]) -> dict[str, Any]:
    """A stored snapshot less what ``as_written`` leaves out (the save's own stamps)."""
    raw = {k: v for k, v in raw.items() if k not in IGNORED}
    raw["journalRef"] = {k: v for k, v in raw["journalRef"].items() if k != "through"}
    return raw


IGNORED = frozenset({"createdAt", "revision", "version", "journalWatermarkSeq"})

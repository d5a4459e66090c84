"""Journal-first durability (decision D10) through the public API, checked at every save.

The central check: for every save the writer reported durable, what a restore reads from disk
at that moment (the snapshot in the store, folded with the journal's tail) is exactly the state
the writer was asked to save. It runs on several workloads (one tool per turn, parallel calls,
an ``unsafe`` tool with its dispatch records, two tasks sharing one journal file) and also
counts how the saves were made, so a journal that never saves anything cannot pass.
"""

from __future__ import annotations

import difflib
import json
import shutil
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
from note_team import note_team

from oma_actors import (
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
)
from oma_actors.checkpoint import Checkpoint
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.codec import encode
from oma_actors.checkpoint.journal_path import MIN_TAIL_BYTES, TAIL_RATIO
from oma_actors.checkpoint.run_writer import RunWriter, Saved
from oma_actors.domain.snapshot import CheckpointSnapshot
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal, verify_run
from oma_actors.orchestration.journal_setup import fold_restored
from oma_actors.runs import MemoryStoreRunStore
from oma_actors.stores import FileStore, InMemoryStore


def team(turns: int, calls: int, effect: str, effects: list[str]) -> Team:
    return note_team(
        turns, calls, effect, lambda ctx: effects.append(ctx.tool_call_id or ""), padding=300
    )


@dataclass
class Workload:
    turns: int
    calls: int
    effect: str
    tasks: int


WORKLOADS = {
    "one_call_per_turn": Workload(turns=12, calls=1, effect="idempotent", tasks=1),
    "parallel_calls": Workload(turns=6, calls=3, effect="idempotent", tasks=1),
    "unsafe_tool": Workload(turns=6, calls=2, effect="unsafe", tasks=1),
    "two_tasks_one_journal": Workload(turns=8, calls=1, effect="idempotent", tasks=2),
}


@dataclass
class Capture:
    boundary: str
    mode: str
    saved: CheckpointSnapshot
    store: bytes
    journal: bytes


async def run_capturing(
    tmp_path: Path, work: Workload, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Capture], list[ProgressEvent], list[str], Team]:
    store_path, journal_path = tmp_path / "state.json", tmp_path / "run.jsonl"
    captures: list[Capture] = []
    original = RunWriter._save_by_path

    async def capturing(self: RunWriter, run: RunAtBoundary, boundary: Any, revision: int) -> Any:
        outcome, written = await original(self, run, boundary, revision)
        if isinstance(outcome, Saved):
            mode = "snapshot" if written is not None else "journal"
            # A journal-only save builds no snapshot: the state the run holds there.
            held = written or replace(await run.build(), revision=revision)
            journal = journal_path.read_bytes() if journal_path.exists() else b""
            captures.append(Capture(boundary, mode, held, store_path.read_bytes(), journal))
        return outcome, written

    monkeypatch.setattr(RunWriter, "_save_by_path", capturing)
    effects: list[str] = []
    events: list[ProgressEvent] = []
    the_team = team(work.turns, work.calls, work.effect, effects)
    tasks = [Task(f"task {i}", "x", assignee=("w", "v")[i], id=f"t{i}") for i in range(work.tasks)]
    journal = JsonlRunJournal(journal_path, flush_interval_ms=0)
    result = await OpenMultiAgent(on_progress=events.append).run_tasks(
        the_team, tasks, checkpoint=CheckpointOptions(store=FileStore(store_path), run_id="d1"),
        journal=JournalOptions(journal, durable=True),
    )  # fmt: skip
    await journal.close()
    assert result.success
    return captures, events, effects, the_team


async def restore_view(tmp_path: Path, capture: Capture, the_team: Team) -> CheckpointSnapshot:
    """What a restore reads from the bytes on disk at the capture (snapshot + folded tail)."""
    where = tmp_path / f"view-{id(capture)}"
    where.mkdir()
    (where / "state.json").write_bytes(capture.store)
    (where / "run.jsonl").write_bytes(capture.journal)
    store = FileStore(where / "state.json")
    stored = await Checkpoint(store, run_id="d1").load_latest()
    assert stored is not None
    journal = JsonlRunJournal(where / "run.jsonl")
    view = await fold_restored(stored, JournalOptions(journal), the_team, lambda _e: None)
    shutil.rmtree(where)
    return view


def as_written(snapshot: CheckpointSnapshot) -> dict[str, Any]:
    """The snapshot's JSON without what differs between any two saves of one state."""
    raw: dict[str, Any] = json.loads(encode(replace(snapshot, raw={}, source=None)))
    for key in ("createdAt", "revision", "version", "journalWatermarkSeq"):
        raw.pop(key, None)
    # How far the journal was known to hold the run when the snapshot was built (D15): a fact
    # about the journal at that moment, not part of the state.
    raw.get("journalRef", {}).pop("through", None)
    return raw


@pytest.mark.parametrize("name", sorted(WORKLOADS))
async def test_every_durable_save_restores_to_exactly_the_state_it_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    work = WORKLOADS[name]
    captures, events, effects, the_team = await run_capturing(tmp_path, work, monkeypatch)
    assert len(effects) == work.turns * work.calls * work.tasks
    for capture in captures:
        view = await restore_view(tmp_path, capture, the_team)
        # Compared as written (the JSON a save of each would write), so in-memory-only detail
        # such as sub-millisecond timestamps does not count, and everything stored does.
        got, want = as_written(view), as_written(capture.saved)
        if got != want:  # show the lines that differ, not two truncated dicts
            diff = difflib.unified_diff(
                json.dumps(want, indent=1).splitlines(), json.dumps(got, indent=1).splitlines()
            )
            pytest.fail(f"after {capture.boundary}:\n" + "\n".join(diff))

    modes = Counter(
        (e.boundary, e.mode) for e in events if isinstance(e, CheckpointSaved)
    )  # fmt: skip
    journal_saves = sum(n for (_, mode), n in modes.items() if mode == "journal")
    snapshots = sum(n for (_, mode), n in modes.items() if mode == "snapshot")
    # Most per-turn boundaries are journal appends; snapshots are the compaction points.
    assert journal_saves > 2 * snapshots, modes
    for boundary in ("assistant_tool_turn", "tool_commit", "tool_results"):
        assert modes[(boundary, "journal")] > 0, modes
    if work.effect == "unsafe":
        # The unsafe tool's dispatch record is a strict journal append, not a snapshot.
        assert modes[("tool_dispatch", "journal")] > 0, modes
    for boundary in ("admission", "task_completed"):
        assert modes[(boundary, "journal")] == 0, modes
    journal = JsonlRunJournal(tmp_path / "run.jsonl")
    assert (await verify_run(journal)).ok


async def test_a_tail_never_outgrows_its_snapshot_and_compactions_are_geometric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = Workload(turns=150, calls=1, effect="idempotent", tasks=1)
    captures, _, _, _ = await run_capturing(tmp_path, work, monkeypatch)
    snapshot_at = 0  # journal size when the last snapshot was written
    snapshot_size = 0
    compactions = 0
    written = 0
    for capture in captures:
        if capture.mode == "snapshot":
            # Its own events reach the journal right after it (held until it was durable).
            snapshot_at, snapshot_size = len(capture.journal), len(capture.store)
            compactions += 1
            written += len(capture.store)
            continue
        # A restore reads the snapshot and folds the tail since: the tail stays within twice
        # it (or within the minimum a tail may always reach), plus the last boundary's events.
        limit = max(TAIL_RATIO * snapshot_size, MIN_TAIL_BYTES) + 8192
        assert len(capture.journal) - snapshot_at <= limit, capture.boundary
    # 450 per-turn boundaries; a snapshot when the tail outgrows the last one (past 64 KiB):
    # a handful, plus admission, the first turn (the task starts) and the task's end.
    assert 5 <= compactions <= 16, compactions
    final = len(captures[-1].store)
    # A geometric series, not 450 rewrites of a growing snapshot: a turn adds t bytes to the
    # journal and s to the snapshot (each holds a result once, t ~ s + the events' overhead),
    # so each snapshot is (1 + TAIL_RATIO * s/t) ~ 2x the last and they sum to ~2x the final
    # one, plus the task's terminal and completion snapshots. 450 full rewrites would be ~220x.
    assert written <= 8 * final, (written, final)


async def test_a_leased_run_keeps_fenced_snapshots_and_the_journal_only_extends_them(
    tmp_path: Path,
) -> None:
    # A journal file append cannot carry the lease's fence (D11): after a takeover a stale
    # owner's journal-only dispatch record would still "succeed". A leased run saves snapshots.
    store = FileStore(tmp_path / "state.json")
    events: list[ProgressEvent] = []
    work = WORKLOADS["unsafe_tool"]
    journal = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0)
    result = await OpenMultiAgent(
        on_progress=events.append, run_store=MemoryStoreRunStore(store)
    ).run_tasks(
        team(work.turns, work.calls, work.effect, []), [Task("t", "x", assignee="w", id="t0")],
        checkpoint=CheckpointOptions(store=store, run_id="leased"),
        journal=JournalOptions(journal, durable=True),
    )  # fmt: skip
    await journal.close()
    assert result.success
    modes = {e.mode for e in events if isinstance(e, CheckpointSaved)}
    assert modes == {"snapshot"}
    # The journal still records the run (OMA's mode): a restore folds it over the snapshot.
    assert (await verify_run(JsonlRunJournal(tmp_path / "run.jsonl"))).ok


@pytest.mark.parametrize("durable", [True, False])
async def test_t98_each_durable_snapshot_is_recorded_as_checkpoint_saved(durable: bool) -> None:
    store = InMemoryStore()
    journal = InMemoryRunJournal()
    work = WORKLOADS["one_call_per_turn"]
    result = await OpenMultiAgent().run_tasks(
        team(work.turns, work.calls, work.effect, []), [Task("t", "x", assignee="w", id="t0")],
        checkpoint=CheckpointOptions(store=store, run_id="t98"),
        journal=JournalOptions(journal, durable=durable),
    )  # fmt: skip
    assert result.success
    saves = [e for e in await journal.read_from(0) if e.type == "checkpoint/saved"]
    assert saves
    for save in saves:
        assert save.data == {"mode": "runTasks", "version": 5, "watermarkSeq": ANY}
        assert save.data["watermarkSeq"] < save.seq  # JR-08
    stored = json.loads((await store.get("__oma_checkpoint__/t98/latest")).value)  # type: ignore[union-attr]
    assert stored["version"] == 5
    # D15: a journal-first snapshot says it depends on its journal; OMA's mode writes OMA's ref.
    ref = {"kind": "InMemoryRunJournal"}
    if durable:  # with how far the journal was known to hold the run when it was built
        assert stored["journalRef"] == {**ref, "durable": True, "through": ANY}
        assert 1 <= stored["journalRef"]["through"] <= stored["journalWatermarkSeq"]
    else:
        assert stored["journalRef"] == ref
    assert saves[-1].data["watermarkSeq"] == stored["journalWatermarkSeq"]

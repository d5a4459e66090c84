"""``run_history`` and ``state_at`` (decision D17): every boundary of a journal-first run.

The central check: the same deterministic run, captured at every boundary its writer reported
saved (the whole snapshot it was asked to save, as OMA's mode writes at every boundary), against
``state_at`` of the journal-first run at that boundary's watermark. They must be equal in their
stored JSON, less ``history_support.IGNORED_ROOT`` and the ``dispatched`` marks (see
``comparable`` for why), and the history must name every such boundary.
"""

from __future__ import annotations

import gc
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from history_support import (
    Effects,
    MemoryWorkspace,
    Workspace,
    comparable,
    make_team,
    run_journal_first,
)
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointError,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.checkpoint import Checkpoint, decode, encode, run_history, state_at
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.history import load_timeline
from oma_actors.checkpoint.run_writer import RunWriter, Saved
from oma_actors.domain.snapshot import CheckpointSnapshot, ForkedFrom
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


@dataclass
class Workload:
    turns: int
    calls: int
    effect: str
    tasks: int


WORKLOADS = {
    "one_call_per_turn": Workload(turns=4, calls=1, effect="idempotent", tasks=1),
    "parallel_unsafe": Workload(turns=3, calls=2, effect="unsafe", tasks=1),
    "two_tasks_one_journal": Workload(turns=3, calls=1, effect="idempotent", tasks=2),
}


async def capture_run(
    space: Workspace, work: Workload, monkeypatch: pytest.MonkeyPatch
) -> dict[int, tuple[str, CheckpointSnapshot]]:
    """Run ``work`` journal-first; every saved boundary's snapshot by its watermark."""
    saved: dict[int, tuple[str, CheckpointSnapshot]] = {}
    original = RunWriter._save_by_path

    async def capturing(self: RunWriter, run: RunAtBoundary, boundary: Any, revision: int) -> Any:
        outcome, snapshot = await original(self, run, boundary, revision)
        if isinstance(outcome, Saved):
            # A journal-only save built no snapshot: the state the run held there.
            held = snapshot or replace(await run.build(), revision=revision)
            # Two boundaries at one watermark: the later one is the state at that seq.
            saved[held.journal_watermark_seq or 0] = (boundary, held)
        return outcome, snapshot

    monkeypatch.setattr(RunWriter, "_save_by_path", capturing)
    team = make_team(work.turns, work.calls, work.effect, Effects())
    result = await run_journal_first(space, team, work.tasks)
    assert result.success
    return saved


@pytest.mark.parametrize("kind", [Workspace, MemoryWorkspace])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
async def test_state_at_every_boundary_is_the_snapshot_saved_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, kind: type[Workspace]
) -> None:
    # On a FileStore, and on a store that keeps an anchor at every compaction, with every
    # outgrown tail compacted (so the folds start from size-only anchors too).
    if kind is MemoryWorkspace:
        from oma_actors.checkpoint import journal_path

        monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)
    space = kind(tmp_path)
    saved = await capture_run(space, WORKLOADS[name], monkeypatch)
    points = await run_history(space.store(), "r1")
    seqs = [point.seq for point in points]
    assert seqs == sorted(set(seqs)), "oldest first, one point per seq"
    assert set(saved) <= set(seqs), f"boundaries missing from the history: {set(saved) - set(seqs)}"
    # The only extra points: a safe call's tool/call, recorded in its commit's boundary.
    extra = [p for p in points if p.seq not in saved]
    assert all(p.boundary == "tool_dispatch" for p in extra), extra
    assert WORKLOADS[name].effect == "unsafe" or extra, "a safe call's tool/call is a point too"
    journal_only = 0
    for point in points:
        state = await state_at(space.store(), "r1", point.seq)
        assert state.journal_watermark_seq == point.seq
        if point.seq in saved:
            boundary, snapshot = saved[point.seq]
            assert comparable(state) == comparable(snapshot), (point, boundary)
            journal_only += point.boundary in ("tool_commit", "tool_results")
    assert journal_only >= 2, "the history must reach journal-only boundaries, not just anchors"


async def test_points_have_labels_attempts_and_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = Workspace(tmp_path)
    await capture_run(space, WORKLOADS["parallel_unsafe"], monkeypatch)
    points = await run_history(space.store(), "r1")
    assert points[0].boundary == "admission"
    assert points[-1].boundary == "task_completed"
    assert {p.attempt for p in points} == {1}
    commit = next(p for p in points if p.boundary == "tool_commit")
    assert commit.task_id == "t0"
    assert commit.label == "t0 turn 1: tool note committed"
    asks = next(p for p in points if p.boundary == "assistant_tool_turn" and p.seq > commit.seq)
    assert asks.label == "t0 turn 2: asks for note, note"
    assert all(a.at <= b.at for a, b in itertools.pairwise(points))


async def test_the_collector_is_held_off_while_the_journal_reads_and_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A history's read is thousands of new containers, none garbage (``gc_paused``).
    space = Workspace(tmp_path)
    await capture_run(space, WORKLOADS["one_call_per_turn"], monkeypatch)
    seen: list[bool] = []
    original = JsonlRunJournal.read_range

    async def recording(self: JsonlRunJournal, *args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(JsonlRunJournal, "read_range", recording)
    points = await run_history(space.store(), "r1")
    await state_at(space.store(), "r1", points[len(points) // 2].seq)
    assert seen == [False, False]
    assert gc.isenabled()


async def test_a_seq_that_is_no_point_is_refused_naming_the_nearest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = Workspace(tmp_path)
    await capture_run(space, WORKLOADS["one_call_per_turn"], monkeypatch)
    seqs = [p.seq for p in await run_history(space.store(), "r1")]
    gap = next(s + 1 for s, t in itertools.pairwise(seqs) if t > s + 1)
    with pytest.raises(CheckpointError) as caught:
        await state_at(space.store(), "r1", gap)
    below, above = max(s for s in seqs if s < gap), min(s for s in seqs if s > gap)
    assert f"nearest points are {below} and {above}" in str(caught.value)


async def test_labels_name_each_task_s_own_tool_when_two_models_reuse_a_call_id(
    tmp_path: Path,
) -> None:
    # A call id is unique within one conversation only: two tasks' models may both name their
    # first call ``c0-0`` (the scripted models here; some OpenAI-compatible servers too).
    class Text(BaseModel):
        text: str

    async def run(args: Text, ctx: ToolContext) -> str:
        return args.text

    def agent(name: str, tool: str) -> AgentConfig:
        def answer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
            if any(m.role == "assistant" for m in messages):
                return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))
            call = ToolUseBlock("c0-0", tool, {"text": name})
            return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))

        spec = define_tool(name=tool, description="d", input_model=Text, execute=run)
        return AgentConfig(name, adapter=ScriptedAdapter(answer), tools=[spec])

    team = Team("t", [agent("w", "note"), agent("v", "tally")])
    space = Workspace(tmp_path)
    journal = space.journal()
    try:
        result = await OpenMultiAgent().run_tasks(
            team,
            [Task("a", "x", assignee="w", id="t0"), Task("b", "x", assignee="v", id="t1")],
            checkpoint=CheckpointOptions(store=space.store(), run_id="r1"),
            journal=JournalOptions(journal, durable=True),
        )
    finally:
        await journal.close()
    assert result.success
    labels = {
        (p.task_id, p.boundary): p.label.split(": ", 1)[1]
        for p in await run_history(space.store(), "r1")
    }
    tool_of = {"t0": "note", "t1": "tally"}
    for task, tool in tool_of.items():
        assert labels[(task, "tool_dispatch")] == f"tool {tool} dispatched"
        assert labels[(task, "tool_commit")] == f"tool {tool} committed"


async def test_only_the_runs_own_events_are_folded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two runs share one journal file: each history holds only its run's events.
    space = Workspace(tmp_path)
    await capture_run(space, WORKLOADS["one_call_per_turn"], monkeypatch)
    team = make_team(2, 1, "idempotent", Effects())
    assert (await run_journal_first(space, team, 1, run_id="r2")).success
    timeline = await load_timeline(space.store(), "r1")
    assert {event.run_id for event in timeline.events} == {"r1"}
    for point in await run_history(space.store(), "r2"):
        assert (await state_at(space.store(), "r2", point.seq)).run_id == "r2"


async def test_a_run_without_anchors_has_no_history() -> None:
    with pytest.raises(CheckpointError, match="'nope' has no history"):
        await run_history(InMemoryStore(), "nope", journal=InMemoryRunJournal())


@pytest.mark.parametrize(
    ("origin", "problem"),
    [
        ("r0", "forkedFrom is not an object"),
        ({"runId": "", "seq": 3}, "forkedFrom.runId"),
        ({"runId": "r0", "seq": -1}, "forkedFrom.seq"),
        ({"runId": "r0"}, "forkedFrom.seq"),
    ],
)
async def test_a_malformed_forked_from_is_refused_on_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, origin: object, problem: str
) -> None:
    space = Workspace(tmp_path)
    await capture_run(space, WORKLOADS["one_call_per_turn"], monkeypatch)
    latest = await Checkpoint(space.store(), run_id="r1").load_latest()
    assert latest is not None
    raw = json.loads(encode(replace(latest, forked_from=ForkedFrom(run_id="r0", seq=3))))
    assert decode(json.dumps(raw), key="k").forked_from == ForkedFrom(run_id="r0", seq=3)
    raw["forkedFrom"] = origin
    with pytest.raises(CheckpointError, match=problem):
        decode(json.dumps(raw), key="k")


async def test_a_compaction_only_for_size_keeps_no_anchor_and_its_point_still_folds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tail that outgrew its snapshot compacts (restore speed), but the journal folds to that
    # snapshot exactly: no full copy is stored for it, and its point's state still equals the
    # snapshot saved there (the fold from the anchor before it reaches it).
    from oma_actors.checkpoint import journal_path

    monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)  # every outgrown tail compacts
    space = Workspace(tmp_path)
    outgrown: list[int] = []
    real_decision = journal_path.JournalPath.journal_only

    def journal_only(self: journal_path.JournalPath, watermark: int, boundary: str) -> bool:
        result = real_decision(self, watermark, boundary)
        if self.outgrown:
            outgrown.append(watermark)
        return result

    monkeypatch.setattr(journal_path.JournalPath, "journal_only", journal_only)
    saved = await capture_run(space, WORKLOADS["parallel_unsafe"], monkeypatch)
    assert outgrown, "the workload must outgrow a snapshot at least once"
    anchors = set(await anchor_marks(space.store()))
    assert not anchors & set(outgrown)  # no copy for a compaction the journal folds to
    for seq in outgrown:
        boundary, snapshot = saved[seq]
        state = await state_at(space.store(), "r1", seq)
        assert comparable(state) == comparable(snapshot), boundary


async def test_a_compaction_only_for_size_keeps_an_anchor_where_an_anchor_costs_only_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A memory store (as a database) reads the latest snapshot alone on a restore: keeping a
    # size-only compaction costs its bytes once, and a fold to a point above it starts there.
    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch, MemoryWorkspace)
    assert mark in await anchor_marks(space.store())
    bases = fold_bases(monkeypatch)
    for seq in above:
        state = await state_at(space.store(), "r1", seq)
        assert comparable(state) == comparable(saved[seq][1]), seq
    assert bases == [mark] * len(above)


async def outgrown_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: type[Workspace] = Workspace,
) -> tuple[Workspace, dict[int, tuple[str, CheckpointSnapshot]], int, list[int]]:
    """The ``parallel_unsafe`` run with every outgrown tail compacted; its first such
    compaction's watermark, and the saved points above it below the next anchor."""
    from oma_actors.checkpoint import journal_path

    monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)
    space = kind(tmp_path)
    outgrown: list[int] = []
    real_decision = journal_path.JournalPath.journal_only

    def journal_only(self: journal_path.JournalPath, watermark: int, boundary: str) -> bool:
        result = real_decision(self, watermark, boundary)
        if self.outgrown:
            outgrown.append(watermark)
        return result

    monkeypatch.setattr(journal_path.JournalPath, "journal_only", journal_only)
    saved = await capture_run(space, WORKLOADS["parallel_unsafe"], monkeypatch)
    anchors = await anchor_marks(space.store())
    mark = outgrown[0]
    end = min(a for a in anchors if a > mark)
    above = [seq for seq in sorted(saved) if mark < seq < end]
    assert above, "the workload must save points above its first outgrown compaction"
    return space, saved, mark, above


async def anchor_marks(store: Any) -> list[int]:
    """The watermarks of run ``r1``'s anchors: its copies, and its latest snapshot when that is
    its newest anchor (a summary in its metadata, ``checkpoint.anchors``)."""
    from oma_actors.checkpoint.anchors import SUMMARY
    from oma_actors.keyspace import checkpoint_key, history_prefix

    marks = []
    for entry in await store.list():
        if entry.key.startswith(history_prefix("r1")):
            marks.append(int(entry.key.rsplit("/", 1)[1]))
        elif entry.key == checkpoint_key("r1") and SUMMARY in (entry.metadata or {}):
            marks.append(int(entry.metadata[SUMMARY]["watermark"]))
    return sorted(marks)


def fold_bases(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The watermark of each snapshot ``state_at`` folds from."""
    from oma_actors.checkpoint import history

    bases: list[int | None] = []
    real = history.fold_tail

    def spy(snapshot: CheckpointSnapshot, *args: Any, **kwargs: Any) -> Any:
        bases.append(snapshot.journal_watermark_seq)
        return real(snapshot, *args, **kwargs)

    monkeypatch.setattr(history, "fold_tail", spy)
    return bases


async def test_state_at_folds_from_the_latest_snapshot_when_it_is_nearer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An interrupted run: its latest snapshot is a size-only compaction (no anchor). A point
    # above it folds from it, not from the anchor below, and gets the same state.
    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch)
    store = space.store()
    checkpoint = Checkpoint(store, run_id="r1")
    await checkpoint.write_encoded(encode(saved[mark][1]), saved[mark][1])
    bases = fold_bases(monkeypatch)
    for seq in above:
        state = await state_at(space.store(), "r1", seq)
        assert comparable(state) == comparable(saved[seq][1]), seq
    assert bases == [mark] * len(above)


async def test_a_latest_snapshot_above_the_point_is_not_folded_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The latest snapshot (the run's end) is above every point: whatever its text seems to
    # show, the decoded watermark decides, and the fold starts at the anchor below the point.
    from oma_actors.checkpoint import history

    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch)
    monkeypatch.setattr(history, "_watermark_hint", lambda text: above[-1] - 1)
    bases = fold_bases(monkeypatch)
    for seq in above:
        state = await state_at(space.store(), "r1", seq)
        assert comparable(state) == comparable(saved[seq][1]), seq
    assert all(base is not None and base < mark for base in bases), bases


@pytest.mark.parametrize("hint", ["read", "misleading"])
async def test_the_latest_snapshot_does_not_make_its_watermark_a_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hint: str
) -> None:
    # A seq is a point because the journal or an anchor says so, never because the latest
    # snapshot names it: at its own watermark the latest snapshot is not a base. Checked on the
    # watermark its text shows and, should that mislead, on the decoded one.
    from oma_actors.checkpoint import history

    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch)
    points = {point.seq for point in await run_history(space.store(), "r1")}
    between = next(seq for seq in range(mark + 1, above[-1]) if seq not in points)
    moved = replace(saved[mark][1], journal_watermark_seq=between)
    await Checkpoint(space.store(), run_id="r1").write_encoded(encode(moved), moved)
    if hint == "misleading":
        monkeypatch.setattr(history, "_watermark_hint", lambda text: between - 1)
    with pytest.raises(CheckpointError, match="history point"):
        await state_at(space.store(), "r1", between)


async def test_a_latest_snapshot_of_another_run_is_not_folded_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch)
    other = replace(saved[mark][1], run_id="r2", identity=None)
    store = space.store()
    await store.set(Checkpoint(store, run_id="r1").key, encode(other), {"namespace": "checkpoint"})
    bases = fold_bases(monkeypatch)
    for seq in above:
        state = await state_at(space.store(), "r1", seq)
        assert comparable(state) == comparable(saved[seq][1]), seq
    assert all(base is not None and base < mark for base in bases), bases


async def test_a_latest_snapshot_that_does_not_decode_leaves_the_anchors_to_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space, saved, mark, above = await outgrown_run(tmp_path, monkeypatch)
    store = space.store()
    broken = '{"version":5,"journalWatermarkSeq":' + str(mark) + ",broken"
    await store.set(Checkpoint(store, run_id="r1").key, broken, {"namespace": "checkpoint"})
    for seq in above:
        state = await state_at(space.store(), "r1", seq)
        assert comparable(state) == comparable(saved[seq][1]), seq


async def test_a_history_lists_only_the_runs_own_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database store holds every run's anchors: a history reads its run's alone.
    from oma_actors.keyspace import history_prefix

    space = MemoryWorkspace(tmp_path)
    await capture_run(space, WORKLOADS["one_call_per_turn"], monkeypatch)
    listed: list[str | None] = []
    real = InMemoryStore.list

    async def spy(self: InMemoryStore, prefix: str | None = None) -> Any:
        listed.append(prefix)
        return await real(self, prefix)

    monkeypatch.setattr(InMemoryStore, "list", spy)
    points = await run_history(space.store(), "r1")
    await state_at(space.store(), "r1", points[-2].seq)
    assert listed
    assert set(listed) == {history_prefix("r1")}


async def test_a_journal_that_does_not_fold_up_to_the_point_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tool/result cut out of the journal: the results message after it refers to a result
    # the fold never committed, so no state is made up for a later point.
    space = Workspace(tmp_path)
    await capture_run(space, WORKLOADS["one_call_per_turn"], monkeypatch)
    points = await run_history(space.store(), "r1")
    last = [p.seq for p in points if p.boundary == "tool_results"][-1]
    lines = space.journal_path.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "tool/result")
    space.journal_path.write_text("".join(lines[:cut] + lines[cut + 1 :]))
    with pytest.raises(CheckpointError, match=f"does not fold up to seq {last}"):
        await state_at(space.store(), "r1", last)


async def test_an_anchor_that_holds_another_run_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under r2's history prefix, a snapshot of r1 whose summary metadata is gone: read from the
    # snapshot itself, it names another run, and the history refuses it.
    from oma_actors.checkpoint.anchors import SUMMARY
    from oma_actors.keyspace import history_key, history_prefix

    space = MemoryWorkspace(tmp_path)
    await capture_run(space, WORKLOADS["one_call_per_turn"], monkeypatch)
    store = space.store()
    [first, *_] = await store.list(prefix=history_prefix("r1"))
    metadata = {k: v for k, v in (first.metadata or {}).items() if k != SUMMARY}
    await store.set(history_key("r2", 2), first.value, metadata)
    with pytest.raises(CheckpointError, match="holds run 'r1'"):
        await run_history(store, "r2")


async def test_a_journal_without_the_events_its_snapshots_say_it_held_is_refused(
    tmp_path: Path,
) -> None:
    # The wrong journal passed (an empty or missing file, another run's, a journal cut short):
    # the history listed the anchors' points alone, as if the run had no others, and a fork
    # at a real point was then told it is no point. The anchors' refs say up to which seq the
    # journal held the run's events; a journal with none of them from there on is refused.
    space = MemoryWorkspace(tmp_path)
    assert (await run_journal_first(space, make_team(3, 1, "idempotent", Effects()), 1)).success
    points = await run_history(space.store(), "r1")
    for journal in (JsonlRunJournal(tmp_path / "missing.jsonl"), InMemoryRunJournal()):
        with pytest.raises(CheckpointError, match="holds no event of run 'r1' at or above seq"):
            await run_history(space.store(), "r1", journal=journal)
        await journal.close()
    assert await run_history(space.store(), "r1", journal=space.journal()) == points

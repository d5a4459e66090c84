"""``fork_run`` (decision D17): a new run from a history point, effects never re-run.

Each test counts the tool's executions per run (``Effects``): a committed call replays, a call
dispatched but not committed at the point is never run again, everything after runs fresh. The
parent's stored entries (its snapshot, its anchors) and its journal lines stay byte-identical.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from history_support import (
    Effects,
    MemoryWorkspace,
    Workspace,
    make_team,
    restore_run,
    run_journal_first,
)

from oma_actors import CheckpointError
from oma_actors.approvals import (
    Allow,
    Reviewer,
    Suspend,
    ToolCallRequest,
    decide_approval,
    get_approval_record,
)
from oma_actors.checkpoint import Checkpoint, fork_run, run_history, state_at
from oma_actors.errors import RunIdTakenError
from oma_actors.events import ProgressEvent, ToolOutcomeUnknown
from oma_actors.keyspace import (
    approval_key,
    checkpoint_key,
    history_key,
    history_prefix,
    run_record_key,
)
from oma_actors.stores.base import Expect, MemoryStore, Write
from oma_actors.testing.forwarding import ForwardingStore
from oma_actors.testing.stores import MinimalStore


def parent_bytes(space: Workspace, run_id: str) -> tuple[dict[str, object], list[str]]:
    return space.entries(f"/{run_id}/"), space.journal_lines(run_id)


async def test_fork_after_a_commit_replays_it_and_never_reruns_the_dispatched_call(
    tmp_path: Path,
) -> None:
    space = Workspace(tmp_path)
    effects = Effects()
    team = make_team(3, 2, "unsafe", effects)
    assert (await run_journal_first(space, team, 1)).success
    points = await run_history(space.store(), "r1")
    # Turn 2: both unsafe calls dispatched, the first committed, the second not yet.
    at = next(p for p in points if p.label == "t0 turn 2: tool note committed")
    before = parent_bytes(space, "r1")

    info = await fork_run(space.store(), "r1", at_seq=at.seq, new_run_id="r1-fork")

    assert (info.run_id, info.parent_run_id, info.parent_seq) == ("r1-fork", "r1", at.seq)
    assert parent_bytes(space, "r1") == before
    child = await Checkpoint(space.store(), run_id="r1-fork").load_latest()
    assert child is not None
    assert child.forked_from is not None
    assert (child.forked_from.run_id, child.forked_from.seq) == ("r1", at.seq)
    assert child.raw["forkedFrom"] == {"runId": "r1", "seq": at.seq}

    events: list[ProgressEvent] = []
    result = await restore_run(space, team, "r1-fork", on_progress=events.append)

    assert result.success
    # c1-0 committed at the point: replayed; c1-1 dispatched there: never run again.
    assert effects.of("r1-fork") == ["c2-0", "c2-1"]
    assert [e.tool_call_id for e in events if isinstance(e, ToolOutcomeUnknown)] == ["c1-1"]
    assert effects.of("r1").count("c1-0") == 1
    assert parent_bytes(space, "r1") == before
    final = await Checkpoint(space.store(), run_id="r1-fork").load_latest()
    assert final is not None
    assert final.forked_from == child.forked_from, "kept on re-save"


async def test_fork_before_a_call_runs_it_fresh_and_a_fork_of_a_fork_reruns_nothing(
    tmp_path: Path,
) -> None:
    space = Workspace(tmp_path)
    effects = Effects()
    team = make_team(3, 1, "idempotent", effects)
    assert (await run_journal_first(space, team, 1)).success
    points = await run_history(space.store(), "r1")
    asks = next(p for p in points if p.label == "t0 turn 2: asks for note")

    await fork_run(space.store(), "r1", at_seq=asks.seq, new_run_id="child")
    assert (await restore_run(space, team, "child")).success
    # The call of turn 2 had not started at the point: it runs (once), as does turn 3's.
    assert effects.of("child") == ["c1-0", "c2-0"]

    child_points = await run_history(space.store(), "child")
    assert child_points[0].seq == asks.seq
    assert child_points[0].boundary == "fork"
    commit = next(p for p in child_points if p.label == "t0 turn 3: tool note committed")
    await fork_run(space.store(), "child", at_seq=commit.seq, new_run_id="grandchild")
    assert (await restore_run(space, team, "grandchild")).success
    assert effects.of("grandchild") == [], "every call was committed at the point"
    grand = await state_at(space.store(), "grandchild", commit.seq)
    assert grand.forked_from is not None
    assert grand.forked_from.run_id == "child"


async def test_a_fork_at_an_idempotent_calls_dispatch_runs_it_once(tmp_path: Path) -> None:
    # The fork cannot tell an idempotent call's tool/call from an unsafe dispatch record: it
    # marks it dispatched and lists it; the child's restore has the team and clears the mark
    # (D1: an idempotent call may run again), so the call runs once, and no outcome is unknown.
    space = Workspace(tmp_path)
    effects = Effects()
    team = make_team(2, 1, "idempotent", effects)
    assert (await run_journal_first(space, team, 1)).success
    points = await run_history(space.store(), "r1")
    dispatch = next(p for p in points if p.boundary == "tool_dispatch")
    await fork_run(space.store(), "r1", at_seq=dispatch.seq, new_run_id="child")
    events: list[ProgressEvent] = []
    assert (await restore_run(space, team, "child", on_progress=events.append)).success
    assert effects.of("child").count("c0-0") == 1
    assert [e for e in events if isinstance(e, ToolOutcomeUnknown)] == []


async def test_a_fork_at_a_suspension_keeps_the_decision_bound(tmp_path: Path) -> None:
    space = Workspace(tmp_path)
    effects = Effects()
    team = make_team(1, 1, "unsafe", effects)

    def gate(call: ToolCallRequest) -> Suspend | Allow:
        return Suspend("review") if call.run_id == "r1" else Allow()

    first = await run_journal_first(space, team, 1, on_tool_call=gate)
    [request] = first.pending_approvals
    points = await run_history(space.store(), "r1")
    suspended = points[-1]
    assert suspended.boundary == "run_suspended"
    await decide_approval(
        space.store(), request_id=request.id, request_hash=request.request_hash,
        decision="approve", reviewer=Reviewer("alice"),
    )  # fmt: skip
    before = parent_bytes(space, "r1")

    await fork_run(space.store(), "r1", at_seq=suspended.seq, new_run_id="child")

    child = await Checkpoint(space.store(), run_id="child").load_latest()
    assert child is not None
    [mine] = child.pending_approvals
    assert mine.run_id == "child"
    assert mine.request_hash == request.request_hash
    record = await get_approval_record(space.store(), mine.id)
    assert record is not None
    assert record.decision is not None
    assert (record.decision.decision, record.decision.reviewer.id) == ("approved", "alice")
    result = await restore_run(space, team, "child", on_tool_call=gate)
    assert result.success
    assert effects.of("child") == ["c0-0"], "the approved call runs once, in the child"
    assert effects.of("r1") == []
    assert parent_bytes(space, "r1") == before

    # The parent resumes and runs the approved call; a fork after its commit binds the
    # decision to its own request and replays the result.
    assert (await restore_run(space, team, "r1", on_tool_call=gate)).success
    assert effects.of("r1") == ["c0-0"]
    after = [p for p in await run_history(space.store(), "r1") if p.boundary == "tool_commit"]
    await fork_run(space.store(), "r1", at_seq=after[-1].seq, new_run_id="late")
    late = await state_at(space.store(), "late", after[-1].seq)
    [decided] = late.approval_decisions
    assert (decided.run_id, decided.decision, decided.reviewer.id) == ("late", "approved", "alice")
    assert (await restore_run(space, team, "late", on_tool_call=gate)).success
    assert effects.of("late") == []


async def test_a_bad_fork_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    space = Workspace(tmp_path)
    team = make_team(2, 1, "idempotent", Effects())
    assert (await run_journal_first(space, team, 1)).success
    points = await run_history(space.store(), "r1")
    seqs = [p.seq for p in points]
    gap = next(s + 1 for s, t in itertools.pairwise(seqs) if t > s + 1)
    everything = space.store_path.read_bytes()
    with pytest.raises(CheckpointError, match="nearest points are"):
        await fork_run(space.store(), "r1", at_seq=gap, new_run_id="child")
    for bad in ("", " child", "r1"):
        with pytest.raises(CheckpointError, match="new_run_id"):
            await fork_run(space.store(), "r1", at_seq=seqs[1], new_run_id=bad)
    assert space.store_path.read_bytes() == everything
    await fork_run(space.store(), "r1", at_seq=seqs[1], new_run_id="child")
    taken = space.store_path.read_bytes()
    with pytest.raises(RunIdTakenError, match="already exists"):
        await fork_run(space.store(), "r1", at_seq=seqs[2], new_run_id="child")
    assert space.store_path.read_bytes() == taken


@pytest.mark.parametrize("kind", ["conditional", "plain"])
async def test_a_fork_writes_the_childs_text_once_and_its_first_compaction_keeps_it(
    tmp_path: Path, kind: str
) -> None:
    # The child's latest snapshot is its own first anchor (a summary in its metadata): one
    # copy of its text is written, and its history still starts at the fork point, before and
    # after the restored child's first compaction overwrites that latest snapshot.
    from oma_actors.checkpoint.anchors import SUMMARY
    from oma_actors.keyspace import checkpoint_key, history_key

    space = Workspace(tmp_path)
    team = make_team(3, 1, "idempotent", Effects())
    assert (await run_journal_first(space, team, 1)).success
    points = await run_history(space.store(), "r1")
    asks = next(p for p in points if p.label == "t0 turn 2: asks for note")

    class Plain:
        """The store's read/write surface alone: no ``apply`` (a plain ``MemoryStore``)."""

        def __init__(self, inner: object) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> object:
            if name in {"apply", "compare_and_set"}:
                raise AttributeError(name)
            return getattr(self._inner, name)

    store = space.store() if kind == "conditional" else Plain(space.store())
    await fork_run(store, "r1", at_seq=asks.seq, new_run_id="child")  # type: ignore[arg-type]
    child = space.entries("/child/")
    assert list(child) == [checkpoint_key("child")]
    latest = await space.store().get(checkpoint_key("child"))
    assert latest is not None
    assert SUMMARY in (latest.metadata or {})
    assert (await run_history(space.store(), "child"))[0].boundary == "fork"

    assert (await restore_run(space, team, "child")).success
    assert history_key("child", asks.seq) in space.entries("/child/")
    assert (await run_history(space.store(), "child"))[0].boundary == "fork"


@pytest.mark.parametrize("kind", ["conditional", "plain"])
async def test_a_fork_onto_an_id_that_has_a_history_is_refused_and_writes_nothing(
    tmp_path: Path, kind: str
) -> None:
    # A leftover anchor of the new id at another seq (no latest snapshot): the child's history
    # would mix with it. Refused on every store kind, before anything is written.
    space = MemoryWorkspace(tmp_path)
    team = make_team(2, 1, "idempotent", Effects())
    assert (await run_journal_first(space, team, 1)).success
    store: MemoryStore = space.store()
    if kind == "plain":
        store = MinimalStore()
        for entry in await space.store().list():
            await store.set(entry.key, entry.value, entry.metadata)
    await store.set(history_key("child", 1), "{}", None)
    before = [(e.key, e.value) for e in await store.list()]
    seqs = [p.seq for p in await run_history(store, "r1")]
    with pytest.raises(RunIdTakenError, match="already has a history"):
        await fork_run(store, "r1", at_seq=seqs[-2], new_run_id="child")
    assert [(e.key, e.value) for e in await store.list()] == before


async def test_a_fork_that_loses_the_id_to_a_concurrent_one_is_refused_and_overwrites_nothing(
    tmp_path: Path,
) -> None:
    # Another fork takes the id between this one's check and its write: the write's own check
    # (one atomic apply) refuses it, and the other's snapshot stays.
    space = MemoryWorkspace(tmp_path)
    assert (await run_journal_first(space, make_team(2, 1, "idempotent", Effects()), 1)).success
    seqs = [p.seq for p in await run_history(space.store(), "r1")]

    class Racing(ForwardingStore):
        async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
            await self.inner.set(checkpoint_key("child"), "the other fork's", None)
            return await super()._apply(checks, writes)

    with pytest.raises(RunIdTakenError, match="created concurrently"):
        await fork_run(Racing(space.store()), "r1", at_seq=seqs[-2], new_run_id="child")
    entry = await space.store().get(checkpoint_key("child"))
    assert entry is not None
    assert entry.value == "the other fork's"
    assert await space.store().list(prefix=history_prefix("child")) == []


async def suspended_then_committed(space: Workspace) -> tuple[str, int]:
    """The parent suspends on an unsafe call, is approved, resumes and commits it: the approval
    request's id and the seq of the commit's point (its snapshot holds the decision)."""
    team = make_team(1, 1, "unsafe", Effects())

    def gate(call: ToolCallRequest) -> Suspend | Allow:
        return Suspend("review") if call.run_id == "r1" else Allow()

    [request] = (await run_journal_first(space, team, 1, on_tool_call=gate)).pending_approvals
    await decide_approval(
        space.store(), request_id=request.id, request_hash=request.request_hash,
        decision="approve", reviewer=Reviewer("alice"),
    )  # fmt: skip
    assert (await restore_run(space, team, "r1", on_tool_call=gate)).success
    commits = [p for p in await run_history(space.store(), "r1") if p.boundary == "tool_commit"]
    return request.id, commits[-1].seq


async def test_a_fork_whose_decision_has_no_ledger_row_is_refused(tmp_path: Path) -> None:
    space = MemoryWorkspace(tmp_path)
    request_id, at = await suspended_then_committed(space)
    await space.store().delete(approval_key(request_id))
    with pytest.raises(CheckpointError, match="has no ledger row"):
        await fork_run(space.store(), "r1", at_seq=at, new_run_id="child")
    assert await space.store().get(checkpoint_key("child")) is None


async def test_a_fork_whose_decision_its_ledger_does_not_hold_is_refused(tmp_path: Path) -> None:
    # The ledger row is back to undecided (the row as it was before the decision): the
    # snapshot's decision cannot be bound to the child's request.
    space = MemoryWorkspace(tmp_path)
    undecided: dict[str, Any] = {}
    real = decide_approval

    async def keeping(store: MemoryStore, *, request_id: str, **kwargs: Any) -> Any:
        undecided[request_id] = await store.get(approval_key(request_id))
        return await real(store, request_id=request_id, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "decide_approval", keeping)
        request_id, at = await suspended_then_committed(space)
    row = undecided[request_id]
    await space.store().set(row.key, row.value, row.metadata)
    with pytest.raises(CheckpointError, match="not in its ledger"):
        await fork_run(space.store(), "r1", at_seq=at, new_run_id="child")
    assert await space.store().get(checkpoint_key("child")) is None


async def test_a_fork_keeps_the_reviewers_edit_of_a_call_approved_with_edits(
    tmp_path: Path,
) -> None:
    # Approved with edits (D17) and forked before the parent ran the call: the child's copy of
    # the decision is bound to the same edit, and its call runs once, with the reviewer's input.
    # The edit was dropped: the child ran the model's input.
    space = MemoryWorkspace(tmp_path)
    effects = Effects()
    team = make_team(1, 1, "unsafe", effects)

    def gate(call: ToolCallRequest) -> Suspend:
        return Suspend("review")

    [request] = (await run_journal_first(space, team, 1, on_tool_call=gate)).pending_approvals
    await decide_approval(
        space.store(), request_id=request.id, request_hash=request.request_hash,
        decision="approve", reviewer=Reviewer("alice"), edited_input={"text": "EDITED"},
    )  # fmt: skip
    at = (await run_history(space.store(), "r1"))[-1].seq
    await fork_run(space.store(), "r1", at_seq=at, new_run_id="child")

    child = await Checkpoint(space.store(), run_id="child").load_latest()
    assert child is not None
    [mine] = child.pending_approvals  # the child's own request, decided in its ledger row
    assert (mine.run_id, mine.request_hash) == ("child", request.request_hash)
    record = await get_approval_record(space.store(), mine.id)
    assert record is not None
    assert record.decision is not None
    assert record.decision.edited_input == {"text": "EDITED"}

    assert (await restore_run(space, team, "child", on_tool_call=gate)).success
    assert effects.of("child") == ["c0-0"]
    final = await Checkpoint(space.store(), run_id="child").load_latest()
    assert final is not None
    assert "noted EDITED" in json.dumps(final.raw)
    assert "noted t0" not in json.dumps(final.raw)


async def test_a_fork_onto_an_id_the_journal_or_a_run_record_still_knows_is_refused(
    tmp_path: Path,
) -> None:
    # Run ``x``'s keys are deleted, its journal lines stay (a shared JSONL file keeps other
    # runs' events; a database journal outlives an interrupted delete). A fork under ``x``
    # would fold those events above its point as its own: a child with another run's answer
    # and none of its parent's work left to do. A run record of the id (a run store's) would
    # refuse every restore of the child. Both are refused, before anything is written.
    space = MemoryWorkspace(tmp_path)
    team = make_team(2, 1, "idempotent", Effects())
    assert (await run_journal_first(space, team, 1)).success
    assert (await run_journal_first(space, team, 1, run_id="x")).success
    store = space.store()
    for entry in await store.list():
        if entry.key == checkpoint_key("x") or entry.key.startswith(history_prefix("x")):
            await store.delete(entry.key)
    seqs = [p.seq for p in await run_history(store, "r1")]
    before = [(e.key, e.value) for e in await store.list()]
    with pytest.raises(RunIdTakenError, match=r"run 'x' has \d+ events in the journal"):
        await fork_run(store, "r1", at_seq=seqs[1], new_run_id="x")
    await store.set(run_record_key("y"), "{}", None)
    with pytest.raises(RunIdTakenError, match="run 'y' has a run record"):
        await fork_run(store, "r1", at_seq=seqs[1], new_run_id="y")
    await store.delete(run_record_key("y"))
    assert [(e.key, e.value) for e in await store.list()] == before
    await fork_run(store, "r1", at_seq=seqs[1], new_run_id="z")
    assert (await restore_run(space, team, "z")).success


async def test_a_child_id_is_trimmed_as_oma_trims_run_ids(tmp_path: Path) -> None:
    # OMA derives a request's id from the run id trimmed by JavaScript's trim(): a child id
    # that trim() changes (a leading U+FEFF, which str.strip() keeps) would give its requests
    # another run's ids, so it is refused; one it keeps ("\x1c", which str.strip() drops) is
    # taken as it is.
    space = Workspace(tmp_path)
    assert (await run_journal_first(space, make_team(1, 1, "unsafe", Effects()), 1)).success
    point = (await run_history(space.store(), "r1"))[-1]
    with pytest.raises(CheckpointError, match="surrounding spaces"):
        await fork_run(space.store(), "r1", at_seq=point.seq, new_run_id="\ufeffchild")
    info = await fork_run(space.store(), "r1", at_seq=point.seq, new_run_id="child\x1c")
    assert info.run_id == "child\x1c"

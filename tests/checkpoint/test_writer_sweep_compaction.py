"""``RunWriter`` with a journal path: what a compaction's outcome does to the journal.

Guards the writer's side of ``JournalPath`` (decision D10) that the path's own tests cannot
see: a compaction whose snapshot did not land releases none of its held events and makes the
next boundary compact; a landed one records the bytes it wrote (the tail's bound); each
dispatched call gets one dispatch mark, at the boundary's watermark (issue 18).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from fold_support import assistant_tool_turn, event, executing, journaled, tool_call

from oma_actors.checkpoint import Checkpoint, RunWriter, Saved, Unknown, journal_path
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.journal_path import JournalPath
from oma_actors.checkpoint.writer import CheckpointActor, Save
from oma_actors.domain.inflight import PendingCall
from oma_actors.domain.messages import Message, ToolUseBlock
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import InMemoryRunJournal
from oma_actors.journal.event import JournalEvent
from oma_actors.journal.ref import durable_ref
from oma_actors.stores.base import Expect, Write
from oma_actors.stores.memory import InMemoryStore


class Tail:
    """A run's journal as the writer sees it: hands out the events it is given, records what
    the writer released and covered; its dispatch marks go to an in-memory journal."""

    def __init__(self) -> None:
        self.events: list[JournalEvent] = []
        self.released = 0
        self.covered = 0
        self.journal = InMemoryRunJournal()
        self.fail = False  # durable_through raises (a batch that did not land)

    def take_through(self, seq: int) -> list[JournalEvent]:
        taken = [e for e in self.events if e.seq <= seq]
        self.events = [e for e in self.events if e.seq > seq]
        return taken

    def take_uncarried(self) -> str | None:
        return None

    async def durable_through(self, seq: int) -> None:
        self.released = max(self.released, seq)
        if self.fail:
            raise OSError(5, "Input/output error")

    def cover(self, seq: int) -> None:
        self.covered = max(self.covered, seq)

    def release(self, seq: int) -> None:
        self.released = max(self.released, seq)

    @property
    def appended_seq(self) -> int:
        return self.released

    def fence_appends(self, fence: object) -> bool:
        return False


class FailingStore(InMemoryStore):
    """An in-memory store whose batches fail while ``fail`` is set (a full disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        if self.fail:
            raise OSError(28, "No space left on device")
        return await super().apply(checks, writes)


def writer_with(tail: Tail, store: InMemoryStore, events: list[ProgressEvent]) -> RunWriter:
    writer = RunWriter(Checkpoint(store, run_id="run-test"), emit=events.append)
    assert writer.attach_journal(JournalPath(tail, unsafe={"worker": frozenset({"lookup"})}))
    return writer


def modes(events: list[ProgressEvent]) -> list[str]:
    return [e.mode for e in events if isinstance(e, CheckpointSaved)]


async def test_a_compaction_whose_write_failed_releases_and_covers_none_of_its_events() -> None:
    # Its events were held back until the snapshot is durable: it never was, so in the
    # journal they would be a tail above a snapshot that never landed.
    tail, store = Tail(), FailingStore()
    events: list[ProgressEvent] = []
    writer = writer_with(tail, store, events)
    store.fail = True
    tail.events = [event(101, "turn/start", turn=2)]
    outcome = await writer.save(journaled(watermark=101), boundary="admission")
    assert isinstance(outcome, Unknown)
    assert (tail.released, tail.covered) == (0, 0)


async def test_after_a_failed_compaction_the_next_journal_boundary_compacts() -> None:
    # What is on disk is unknown after the failed write: a journal-only save would extend a
    # snapshot that may not exist.
    tail, store = Tail(), FailingStore()
    events: list[ProgressEvent] = []
    writer = writer_with(tail, store, events)
    assert isinstance(await writer.save(journaled(), boundary="admission"), Saved)
    store.fail = True
    failed = await writer.save(journaled(watermark=101), boundary="task_completed")
    assert isinstance(failed, Unknown)
    store.fail = False
    tail.events = [assistant_tool_turn(102)]
    snapshot = journaled(executing(), watermark=102)
    assert isinstance(await writer.save(snapshot, boundary="assistant_tool_turn"), Saved)
    assert modes(events) == ["snapshot", "snapshot"]
    assert tail.released == 102  # released once that snapshot landed


async def test_a_compaction_records_the_bytes_it_wrote_as_the_tails_bound() -> None:
    # A tail may grow to TAIL_RATIO x the snapshot's bytes: with a large snapshot, a tail
    # past MIN_TAIL_BYTES but under that bound is still saved by the journal.
    tail, store = Tail(), InMemoryStore()
    events: list[ProgressEvent] = []
    writer = writer_with(tail, store, events)
    big = replace(journaled(), goal="g" * journal_path.MIN_TAIL_BYTES)
    assert isinstance(await writer.save(big, boundary="admission"), Saved)
    pad = "p" * (journal_path.MIN_TAIL_BYTES + 1000)
    tail.events = [event(101, "turn/start", turn=2, pad=pad)]
    assert isinstance(await writer.save(replace(big, journal_watermark_seq=101),
                                        boundary="assistant_tool_turn"), Saved)  # fmt: skip
    assert modes(events) == ["snapshot", "journal"]


def dispatched(*calls: str, watermark: int) -> RunAtBoundary:
    """The run with ``calls`` of ``worker`` dispatched and uncommitted, at ``watermark``."""
    blocks = [ToolUseBlock(call, "lookup", {}) for call in calls]
    turn = Message("assistant", list(blocks))
    item = executing(
        conversation=(executing().state.conversation[0], turn),
        messages=(turn,),
        pending=tuple(PendingCall(call=b, dispatched=True) for b in blocks),
    )
    return RunAtBoundary.of(journaled(item, watermark=watermark))


async def test_each_dispatched_call_is_marked_once_at_the_watermark_of_its_dispatch() -> None:
    # A mark says "the journal held seq S" when the call was dispatched (issue 18): one per
    # call, not one more at each later dispatch of its turn.
    tail, store = Tail(), InMemoryStore()
    events: list[ProgressEvent] = []
    writer = writer_with(tail, store, events)
    assert isinstance(await writer.save(journaled(), boundary="admission"), Saved)
    tail.events = [tool_call(101)]
    first = await writer.save_run(dispatched("c1", watermark=101), boundary="tool_dispatch")
    tail.events = [event(102, "tool/call", call={"id": "c2"})]
    second = await writer.save_run(dispatched("c1", "c2", watermark=102), boundary="tool_dispatch")
    assert isinstance(first, Saved)
    assert isinstance(second, Saved)
    assert modes(events) == ["snapshot", "journal", "journal"]
    assert (writer.compactions, writer.journal_saves) == (1, 2)
    marks = await tail.journal.marks_of("run-test")
    assert [(m.call_id, m.seq) for m in marks] == [("c1", 101), ("c2", 102)]


def test_a_committed_call_is_not_dispatched_uncommitted() -> None:
    run = RunAtBoundary.of(journaled(executing(committed=True, pending=(
        replace(executing(committed=True).state.pending[0], dispatched=True),
    ))))  # fmt: skip
    assert list(run.dispatched_uncommitted()) == []


async def test_the_checkpoint_actor_passes_the_committed_calls_on() -> None:
    events: list[ProgressEvent] = []
    writer = RunWriter(Checkpoint(InMemoryStore(), run_id="run-test"), emit=events.append)
    run = RunAtBoundary.of(journaled())
    await CheckpointActor(writer).receive(Save(run=run, boundary="tool_commit", committed=("c1",)))
    saved = [e for e in events if isinstance(e, CheckpointSaved)]
    assert [e.committed for e in saved] == [("c1",)]


def test_a_tail_exactly_at_its_bound_is_still_journal_only() -> None:
    # The bound is "outgrew": a tail of exactly MIN_TAIL_BYTES does not compact.
    tail = Tail()
    path = JournalPath(tail, unsafe={})
    path.compacted(journaled(), size=1)
    probe = event(101, "turn/start", turn=2, pad="")
    room = journal_path.MIN_TAIL_BYTES - journal_path._size([probe])
    tail.events = [event(101, "turn/start", turn=2, pad="p" * room)]
    assert journal_path._size(tail.events) == journal_path.MIN_TAIL_BYTES
    assert path.journal_only(101, "assistant_tool_turn"), path.divergence


async def test_a_compaction_saves_although_the_previous_ones_events_failed_to_append() -> None:
    # The snapshot covers that hole: the failed wait only means its ``through`` claims less.
    tail, store = Tail(), InMemoryStore()
    events: list[ProgressEvent] = []
    writer = writer_with(tail, store, events)
    ref = durable_ref({"kind": "InMemoryRunJournal"})
    assert isinstance(await writer.save(replace(journaled(), journal_ref=ref),
                                        boundary="admission"), Saved)  # fmt: skip
    tail.fail = True
    second = replace(journaled(watermark=101), journal_ref=ref)
    assert isinstance(await writer.save(second, boundary="task_completed"), Saved)
    assert modes(events) == ["snapshot", "snapshot"]


async def test_no_dispatch_mark_is_written_before_the_dispatch_is_durable() -> None:
    # A mark says "the journal held seq S": written before the append that failed, it would
    # vouch for events the journal never got, and a restore would refuse a sound journal.
    tail, store = Tail(), InMemoryStore()
    events: list[ProgressEvent] = []
    writer = writer_with(tail, store, events)
    assert isinstance(await writer.save(journaled(), boundary="admission"), Saved)
    tail.fail = True
    tail.events = [tool_call(101)]
    outcome = await writer.save_run(dispatched("c1", watermark=101), boundary="tool_dispatch")
    assert isinstance(outcome, Unknown)
    assert await tail.journal.marks_of("run-test") == []


def test_a_compaction_after_one_for_size_alone_is_not_taken_for_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ``outgrown`` says the last compaction needs no history anchor (D17): it must not stick
    # to the next one, made for another reason (a FileStore would keep no anchor of it).
    monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)
    tail = Tail()
    path = JournalPath(tail, unsafe={})
    path.compacted(journaled(), size=1)
    tail.events = [event(101, "turn/start", turn=2)]
    assert not path.journal_only(101, "assistant_tool_turn")
    assert path.outgrown
    path.compacted(journaled(watermark=101), size=1)
    assert not path.journal_only(101, "task_completed")
    assert not path.outgrown

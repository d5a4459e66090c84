"""What a restore of a journal-first run hands its next attempt (``fold_restored_tail``): a
revision above every journal-only save of the tail, and seqs above every seq a dispatch mark
vouches for (mutation sweep of the journal setup)."""

from __future__ import annotations

import pytest
from fold_support import RUN, executing, journaled, whole_round
from note_team import note_team

from oma_actors.errors import ConfigurationError
from oma_actors.journal import InMemoryRunJournal, JournalOptions
from oma_actors.journal.marks import DispatchMark
from oma_actors.orchestration.journal_setup import (
    check_at_rest,
    fold_restored_tail,
    marks_past_tail,
    resolve_journal,
    uncommitted,
)
from oma_actors.stores import InMemoryStore, RedactingStore

TEAM = note_team(1, 1, "unsafe", lambda ctx: None)


async def test_a_durable_tail_continues_the_revision_above_its_journal_only_saves() -> None:
    # Each journal-only save reported a revision (CheckpointSaved) and appended at least one
    # event above the watermark: the next attempt must not report one of them again.
    journal = InMemoryRunJournal()
    await journal.append(whole_round(101))
    snapshot = journaled(watermark=100)
    folded, seen = await fold_restored_tail(
        snapshot, JournalOptions(journal, durable=True), TEAM, lambda e: None
    )
    assert folded.revision == snapshot.revision + 7
    assert seen == 107
    oma, _ = await fold_restored_tail(
        snapshot, JournalOptions(journal, durable=False), TEAM, lambda e: None
    )
    assert oma.revision == snapshot.revision  # OMA's mode: the tail saved nothing


async def test_a_salvaged_restore_continues_above_a_mark_past_the_tail() -> None:
    # A mark at seq 150 vouches the journal held the run that far; the tail ends at 107 (it
    # lost events). The next attempt's seqs start above 150: reusing them would make a later
    # restore read new events as the marked, lost ones.
    journal = InMemoryRunJournal()
    await journal.append(whole_round(101))
    await journal.mark(
        DispatchMark(run_id=RUN, seq=150, task_id="b", agent_name="worker", call_id="tu-9")
    )
    _, seen = await fold_restored_tail(
        journaled(watermark=100), JournalOptions(journal, durable=True), TEAM, lambda e: None,
        on_damaged="salvage",
    )  # fmt: skip
    assert seen == 150


def test_an_in_memory_journal_beside_a_redacting_store_is_not_refused() -> None:
    # It keeps nothing at rest, so there is nothing in clear to refuse (check_at_rest).
    store = RedactingStore(InMemoryStore(), patterns=[r"patient-\d+"])
    check_at_rest(JournalOptions(InMemoryRunJournal()), store)


def test_a_journal_turned_off_resolves_to_no_journal() -> None:
    # ``JournalOptions(enabled=False)`` says "no journal" and ends the search (JR-02).
    off = JournalOptions(InMemoryRunJournal(), enabled=False)
    assert resolve_journal(off, JournalOptions(InMemoryRunJournal())) is None


class NoDescribe:
    """Appends, reads and closes, but cannot describe itself for a snapshot's journalRef."""

    async def append(self, events: object) -> None: ...

    async def read_from(self, seq: int) -> list[object]:
        return []

    async def close(self) -> None: ...


def test_an_object_without_describe_is_not_taken_for_a_journal() -> None:
    with pytest.raises(ConfigurationError, match="journal must be a RunJournal"):
        resolve_journal(NoDescribe())


def test_a_journal_with_no_tail_below_a_mark_says_it_ends_at_the_watermark() -> None:
    # Nothing above the watermark was read: the journal ends where the snapshot does.
    mark = DispatchMark(run_id=RUN, seq=150, task_id="b", agent_name="worker", call_id="tu-9")
    lost = marks_past_tail(journaled(watermark=100), [], [mark])
    assert lost is not None
    assert "ends at seq 100, but it held seq 150" in lost.reason


def test_only_calls_without_a_commit_count_as_uncommitted() -> None:
    # A salvaged restore of a journal that lost events treats these as outcome unknown; a
    # committed call is replayed from its commit.
    assert uncommitted(journaled(executing(committed=True))) == ()
    assert [c.call_id for c in uncommitted(journaled(executing()))] == ["tu-1"]

"""A damaged tail on restore (decision D15): refused journal-first, OMA's discard rule otherwise.

Pure fold-and-mark level (``fold_restored_tail`` with an in-memory journal): the entry holds
call ``tu-1`` of an ``unsafe`` tool pending, the tail holds its ``tool/call`` and then an event
that fails a fold check (a seq that does not increase).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from fold_support import RUN, executing, journaled, tool_call

from oma_actors import AgentConfig, Team, define_tool
from oma_actors.errors import JournalDamagedError
from oma_actors.events import JournalTailDiscarded, ProgressEvent
from oma_actors.journal import InMemoryRunJournal, JournalOptions
from oma_actors.orchestration.journal_setup import fold_restored_tail
from oma_actors.testing import ScriptedAdapter


def team() -> Team:
    from pydantic import BaseModel

    class Q(BaseModel):
        q: str

    async def lookup(args: Q, ctx: object) -> str:
        raise AssertionError("never run here")

    tool = define_tool(
        name="lookup", description="l", input_model=Q, execute=lookup, effect="unsafe"
    )
    return Team(
        "t", [AgentConfig("worker", adapter=ScriptedAdapter(lambda m, o: None), tools=[tool])]
    )  # type: ignore[arg-type]


async def restore(durable: bool, on_damaged: str = "refuse") -> tuple[object, list[ProgressEvent]]:
    ref = {"kind": "InMemoryRunJournal", **({"durable": True} if durable else {})}
    snapshot = replace(journaled(executing()), journal_ref=ref)
    assert snapshot.run_id == RUN
    journal = InMemoryRunJournal()
    await journal.append([tool_call(101), tool_call(101)])  # the seq does not increase
    emitted: list[ProgressEvent] = []
    folded, _ = await fold_restored_tail(
        snapshot, JournalOptions(journal), team(), emitted.append,
        on_damaged=on_damaged,  # type: ignore[arg-type]
    )  # fmt: skip
    return folded, emitted


async def test_omas_mode_discards_the_tail_but_never_reruns_its_started_unsafe_call() -> None:
    folded, emitted = await restore(durable=False)
    [item] = folded.in_flight[0].state.pending  # type: ignore[attr-defined]
    assert item.dispatched  # started in the discarded tail: outcome unknown, never run again
    assert [type(e) for e in emitted] == [JournalTailDiscarded]


async def test_a_journal_first_tail_that_fails_a_check_is_refused() -> None:
    with pytest.raises(JournalDamagedError) as caught:
        await restore(durable=True)
    assert caught.value.seq == 101
    assert "append-only" in caught.value.reason


async def test_a_journal_first_tail_salvaged_marks_its_started_calls() -> None:
    folded, emitted = await restore(durable=True, on_damaged="salvage")
    [item] = folded.in_flight[0].state.pending  # type: ignore[attr-defined]
    assert item.dispatched
    assert [type(e) for e in emitted] == [JournalTailDiscarded]

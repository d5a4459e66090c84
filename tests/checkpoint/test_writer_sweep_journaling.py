"""``RunJournaling`` beside a journal-first writer: what an attempt's end lets out, and which
conversations a sibling's snapshot holds (mutation sweep of the journal writer side).

At the end of an attempt, the held events go out only when a restore would not fold them into
a durable snapshot's entry (``release_trailing``): the entries it knows are those of the last
snapshot that became durable (``_snapshot_durable``). And a conversation the journal opened at
or below a snapshot's watermark is held by that snapshot (``opened``).
"""

from __future__ import annotations

from dataclasses import replace

from checkpoint_support import make_snapshot, task_state
from note_team import note_team

from oma_actors.agents.facts import Prompted
from oma_actors.checkpoint import (
    Checkpoint,
    CheckpointSnapshot,
    InFlightTask,
    RunWriter,
    Saved,
)
from oma_actors.domain.inflight import RunnerState
from oma_actors.domain.messages import ChatOptions, Message, TextBlock
from oma_actors.journal import EventDraft, InMemoryRunJournal, JournalOptions
from oma_actors.journal import vocabulary as v
from oma_actors.journal.base import read_run
from oma_actors.orchestration.journaling import RunJournaling
from oma_actors.stores.memory import InMemoryStore

RUN = "run-test"
PROMPT = Message("user", [TextBlock("do b")])


def state(turns: int = 1) -> RunnerState:
    return RunnerState(phase="awaiting_model", conversation=(PROMPT,), turns=turns)


def snapshot_at(watermark: int) -> CheckpointSnapshot:
    """A v5 snapshot of the run with task ``b`` of ``w`` in flight, one turn done."""
    return make_snapshot(
        tasks=(task_state("b", "in_progress"),),
        completed=(),
        version=5,
        in_flight=(InFlightTask(task_id="b", assignee="w", state=state(), journal_seq=None),),
        journal_watermark_seq=watermark,
        journal_ref={"kind": "InMemoryRunJournal"},
    )


async def attempt_ending_with(held: EventDraft) -> list[int]:
    """A fresh journal-first run: its admission snapshot (``b`` at one turn) becomes durable,
    then ``held`` is recorded and the attempt aborts. The seqs the journal then holds."""
    journal = InMemoryRunJournal()
    journaling = await RunJournaling.open(
        JournalOptions(journal, durable=True), run_id=RUN, attempt=1, emit=lambda e: None
    )
    writer = RunWriter(Checkpoint(InMemoryStore(), run_id=RUN), emit=lambda e: None)
    journaling.attach(writer, note_team(1, 1, "unsafe", lambda ctx: None))
    assert journaling.journal_first
    journaling.recorder.emit(v.user_message(message=PROMPT, origin="input", task_id="b",
                                            agent_name="w"))  # fmt: skip
    watermark = journaling.recorder.last_seq
    assert isinstance(await writer.save(snapshot_at(watermark), boundary="admission"), Saved)
    journaling.recorder.emit(held)  # above the snapshot: held until a save takes it
    journaling.abort(RuntimeError("stop"))
    await journaling.recorder.flush()
    return [event.seq for event in await read_run(journal, RUN)]


async def test_an_event_of_a_durable_entry_stays_held_at_the_end_of_the_attempt() -> None:
    # Guards the durable entries' refresh when a snapshot becomes durable: a fresh run opened
    # with none, so without it every held event passed for one a restore ignores.
    seqs = await attempt_ending_with(
        v.user_message(
            message=Message("user", [TextBlock("more")]),
            origin="input",
            task_id="b",
            agent_name="w",
        )
    )
    assert seqs == [1], "the held message of b would be folded into b's durable entry"


async def test_an_event_of_a_task_no_durable_snapshot_holds_goes_out_at_the_end() -> None:
    seqs = await attempt_ending_with(
        v.user_message(message=PROMPT, origin="input", task_id="c", agent_name="w")
    )
    assert seqs == [1, 2, 3, 4], "c is in no durable snapshot: a restore ignores its events"


async def test_a_turn_end_that_does_not_raise_the_entrys_turns_goes_out_at_the_end() -> None:
    # b's durable entry has one turn: an end of turn 1 changes nothing a fold would apply.
    seqs = await attempt_ending_with(v.turn_ended(turn=1, outcome="tool_use", task_id="b",
                                                  agent_name="w"))  # fmt: skip
    assert seqs == [1, 2, 3, 4]


async def test_a_conversation_opened_at_the_watermark_is_held_by_the_snapshot() -> None:
    # A sibling's snapshot whose watermark is exactly the new conversation's prompt: a fold
    # opens a conversation only from a prompt above the watermark, so the snapshot must hold
    # it, else its later journal-only events are skipped on restore and its calls run again.
    journaling = await RunJournaling.open(
        JournalOptions(InMemoryRunJournal(), durable=True), run_id=RUN, attempt=1,
        emit=lambda e: None,
    )  # fmt: skip
    opening = replace(state(turns=0), conversation=(PROMPT,))
    journaling.request("c", "w", opening, ChatOptions(model="m"), None, (Prompted(message=PROMPT),))
    prompt_seq = 1
    assert set(journaling.opened({}, prompt_seq)) == {"c"}
    assert set(journaling.opened({}, prompt_seq - 1)) == set()

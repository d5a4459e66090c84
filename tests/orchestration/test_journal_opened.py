"""``RunJournaling.opened``: the journal-first conversations a snapshot must hold itself.

A task's first request records its prompt journal-only; until the run adopts a boundary of
the task, a snapshot written meanwhile (a sibling's) holds the conversation only through this
(``tests/crash/test_crash_opened_conversation.py`` shows what a restore lost without it).
"""

from __future__ import annotations

from oma_actors.agents.facts import Prompted
from oma_actors.agents.turn import initial_state, with_user_message
from oma_actors.domain.messages import ChatOptions
from oma_actors.journal import InMemoryRunJournal
from oma_actors.journal.recorder import JournalRecorder
from oma_actors.orchestration.journaling import RunJournaling

OPTIONS = ChatOptions(model="m")


def journaling(*, durable: bool = True) -> RunJournaling:
    recorder = JournalRecorder(
        InMemoryRunJournal(), run_id="r", attempt=1, last_seq=0, durable=durable,
        enforce_lineage=False, on_error=None, clock=lambda: 0.0,
    )  # fmt: skip
    return RunJournaling(recorder, {})


async def test_a_conversation_opened_at_or_below_the_watermark_is_held() -> None:
    run = journaling()
    state = initial_state("do t")
    run.request("t", "w", state, OPTIONS, opening=(Prompted(message=state.conversation[0]),))
    prompt_seq = 1  # then turn/start at 2
    assert run.opened({}, prompt_seq) == {"t": ("w", state)}
    assert run.opened({}, prompt_seq - 1) == {}  # above the watermark: the fold opens it
    assert run.opened({}, None) == {}  # no journal watermark: nothing to hold
    boundary = {"t": ("w", with_user_message(state, "more"))}
    assert run.opened(boundary, prompt_seq) == boundary  # the run's own state wins
    run.settle({})  # a save while no boundary of it was seen yet: it stays
    assert run.opened({}, prompt_seq) == {"t": ("w", state)}
    run.settle(boundary)
    run.settle({})  # held in flight once, then gone (completed): forgotten
    assert run.opened({}, prompt_seq) == {}
    await run.recorder.flush()


async def test_only_an_opening_request_and_only_journal_first() -> None:
    best_effort = journaling(durable=False)
    state = initial_state("do t")
    opening = (Prompted(message=state.conversation[0]),)
    best_effort.request("t", "w", state, OPTIONS, opening=opening)
    assert best_effort.opened({}, 10) == {}  # OMA's mode keeps OMA's snapshots
    run = journaling()
    later = with_user_message(state, "go on")
    run.request("t", "w", later, OPTIONS, opening=(Prompted(message=later.conversation[-1]),))
    assert run.opened({}, 10) == {}  # going on with a conversation opens none
    run.request(None, "lead", state, OPTIONS, opening=opening)
    assert run.opened({}, 10) == {}  # a conversation outside the queue has no entry
    await best_effort.recorder.flush()
    await run.recorder.flush()

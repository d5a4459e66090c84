"""``record_resumed``: a journal-first restore's admission, from what the restore did (D14)."""

from __future__ import annotations

from dataclasses import replace

from oma_actors.agents.turn import initial_state
from oma_actors.domain.tasks import TaskState
from oma_actors.journal import InMemoryRunJournal, JournalOptions
from oma_actors.orchestration.journal_events import record_resumed
from oma_actors.orchestration.journaling import RunJournaling
from oma_actors.orchestration.queue import TaskQueue


def pending(task_id: str) -> TaskState:
    return TaskState(id=task_id, title=task_id, description=task_id, status="pending")


async def journaling() -> RunJournaling:
    options = JournalOptions(InMemoryRunJournal(), durable=True)
    return await RunJournaling.open(options, run_id="r", attempt=2, emit=lambda event: None)


async def test_a_task_returned_to_pending_without_a_conversation_marks_the_admission() -> None:
    # The restore returned both in-progress tasks to pending (TQ-13); ``a`` resumes its
    # conversation (its start is an event), ``b`` has none: no event says it is pending again.
    run = await journaling()
    queue = TaskQueue([pending("a"), pending("b")])
    restored = [
        replace(pending("a"), status="in_progress"),
        replace(pending("b"), status="in_progress"),
    ]
    record_resumed(run, queue, {"a": ("worker", initial_state("go"))}, restored)
    assert run.recorder.take_uncarried() == "task 'b' returned to pending"
    assert run.recorder.take_uncarried() is None  # taken once


async def test_every_task_resumed_leaves_the_admission_an_append() -> None:
    run = await journaling()
    queue = TaskQueue([pending("a")])
    restored = [replace(pending("a"), status="in_progress")]
    record_resumed(run, queue, {"a": ("worker", initial_state("go"))}, restored)
    assert run.recorder.take_uncarried() is None

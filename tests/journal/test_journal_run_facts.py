"""The run's facts reach the journal where they happen, best-effort (D14, JR-06)."""

from __future__ import annotations

from typing import cast

from oma_actors.orchestration.journal_events import record_run_fact
from oma_actors.orchestration.journaling import RunJournaling
from oma_actors.orchestration.run_facts import Skipped


class BrokenJournaling:
    """A journal whose recorder is gone: every recording fails."""

    durable = False

    @property
    def recorder(self) -> object:
        raise RuntimeError("the recorder is gone")


def test_a_fact_that_cannot_be_recorded_does_not_break_the_run() -> None:
    # Recording is best-effort like every journal append: the run actor reporting the fact
    # goes on (its progress event, its dispatch) whatever the journal does.
    journaling = cast("RunJournaling", BrokenJournaling())
    record_run_fact(journaling, Skipped(task_id="a", reason="Skipped: run aborted."))


def test_a_run_without_a_journal_reports_its_facts_to_nobody() -> None:
    record_run_fact(None, Skipped(task_id="a", reason="Skipped: run aborted."))


class FailingEmitRecorder:
    """A recorder whose appends fail; it keeps what it was told the fold cannot carry."""

    def __init__(self) -> None:
        self.uncarried_reasons: list[str] = []

    def emit(self, event: object) -> None:
        raise ValueError("the event cannot be built")

    def uncarried(self, reason: str) -> None:
        self.uncarried_reasons.append(reason)


class FailingEmitJournaling:
    durable = True

    def __init__(self) -> None:
        self.recorder = FailingEmitRecorder()


def test_a_fact_the_journal_missed_makes_the_next_save_compact() -> None:
    # The journal now lacks the task's start: a journal-only save would give a restore a
    # queue without it. The recorder is told, so the next save writes the whole snapshot.
    journaling = FailingEmitJournaling()
    record_run_fact(cast("RunJournaling", journaling), Skipped(task_id="a", reason="aborted"))
    assert len(journaling.recorder.uncarried_reasons) == 1
    assert "Skipped could not be journaled" in journaling.recorder.uncarried_reasons[0]

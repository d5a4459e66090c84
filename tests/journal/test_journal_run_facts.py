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

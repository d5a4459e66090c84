"""``JournalOptions`` refuses what is no journal when it is made, not in the middle of a run."""

from __future__ import annotations

import pytest

from oma_actors import ConfigurationError, JournalOptions
from oma_actors.journal import InMemoryRunJournal


@pytest.mark.parametrize("journal", [object(), "run.jsonl", None])
def test_a_journal_option_that_is_no_journal_is_refused_naming_what_it_got(
    journal: object,
) -> None:
    with pytest.raises(
        ConfigurationError, match=f"needs a RunJournal.*got {type(journal).__name__}"
    ):
        JournalOptions(journal)  # type: ignore[arg-type]


def test_a_journal_is_taken_with_its_switches() -> None:
    journal = InMemoryRunJournal()
    options = JournalOptions(journal, durable=False)
    assert options.journal is journal
    assert options.durable is False

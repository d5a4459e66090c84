"""``JournalOptions``: how a run uses its journal (spec JR-02, decision D10)."""

from __future__ import annotations

from dataclasses import dataclass

from oma_actors.errors import ConfigurationError
from oma_actors.journal.base import RunJournal


@dataclass(frozen=True, slots=True)
class JournalOptions:
    """A journal and its switches; a bare ``RunJournal`` means the defaults.

    Attributes:
        journal: the backend; the runtime never closes it (the caller owns it, as OMA's does).
        enabled: ``False`` turns the journal off while keeping the field.
        enforce_lineage: a model-visible block with no recorded lineage raises
            ``JournalLineageError`` before the adapter call (JR-09).
        durable: the journal is the save path (D10); ``False`` is OMA's best-effort mode.

    Raises:
        ConfigurationError: ``journal`` is not a ``RunJournal`` (found here, not as an
            ``AttributeError`` in the middle of a run).
    """

    journal: RunJournal
    enabled: bool = True
    enforce_lineage: bool = False
    durable: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.journal, RunJournal):
            raise ConfigurationError(
                f"JournalOptions needs a RunJournal (JsonlRunJournal, open_journal(uri), ...), "
                f"got {type(self.journal).__name__}"
            )

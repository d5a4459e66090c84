"""Run journals (spec 17.1-17.4): OMA's append-only event log of a run, and ``verify_run``.

``JsonlRunJournal`` writes the JSONL the TypeScript OMA writes; ``JournalRecorder`` gives one run's
events their seqs across attempts; the constructors of ``vocabulary`` build OMA's event types;
``verify_run`` audits a journal offline. The tail fold lives in ``oma_actors.checkpoint.fold``.
"""

from oma_actors.journal import vocabulary
from oma_actors.journal.base import InMemoryRunJournal, RunJournal
from oma_actors.journal.codec import EVENT_TYPES, parse_line, peek_seq, to_json_line
from oma_actors.journal.encrypting import EncryptingJournal, open_event, seal_event
from oma_actors.journal.errors import (
    JournalAppendError,
    JournalClosedError,
    JournalCorruptError,
    JournalLineageError,
)
from oma_actors.journal.event import JournalEvent
from oma_actors.journal.jsonl import JsonlRunJournal
from oma_actors.journal.options import JournalOptions
from oma_actors.journal.recorder import JournalRecorder
from oma_actors.journal.verify import VerifyFinding, VerifyResult, verify_events, verify_run
from oma_actors.journal.vocabulary import EventDraft, canonical_content_hash

__all__ = [
    "EVENT_TYPES",
    "EncryptingJournal",
    "EventDraft",
    "InMemoryRunJournal",
    "JournalAppendError",
    "JournalClosedError",
    "JournalCorruptError",
    "JournalEvent",
    "JournalLineageError",
    "JournalOptions",
    "JournalRecorder",
    "JsonlRunJournal",
    "RunJournal",
    "VerifyFinding",
    "VerifyResult",
    "canonical_content_hash",
    "open_event",
    "parse_line",
    "peek_seq",
    "seal_event",
    "to_json_line",
    "verify_events",
    "verify_run",
    "vocabulary",
]

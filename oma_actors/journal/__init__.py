"""Run journals (spec 17.1-17.4): OMA's append-only event log of a run, and ``verify_run``.

``JsonlRunJournal`` writes the JSONL the TypeScript OMA writes; ``open_journal`` opens the journal
a store URI names (a JSONL file, a table in a SQLite or PostgreSQL store's database, or memory,
D15); ``JournalRecorder`` gives one run's events their seqs across attempts; the constructors
of ``vocabulary`` build OMA's event types; ``verify_run`` audits a journal offline.

The journal is one room (D14): beside the vocabulary, the recorder, the codec, verify and the
backends live the pure fold that turns a snapshot plus events into the run's state (``fold``,
its rules in ``fold_rules``, a context rewrite's layout in ``context_layout``), the snapshot's
journal members (``fields``, ``ref``) and the read of a snapshot's tail (``tail``). The state
types the fold produces sit below it, in ``oma_actors.domain.snapshot``; ``oma_actors.checkpoint``
exports the fold's public names (``fold_tail``, ``read_journal_tail``) with the snapshot's.
"""

from oma_actors.journal import vocabulary
from oma_actors.journal.base import InMemoryRunJournal, RunJournal, read_run
from oma_actors.journal.codec import EVENT_TYPES, parse_line, peek_seq, to_json_line
from oma_actors.journal.encrypting import EncryptingJournal, open_event, seal_event
from oma_actors.journal.errors import (
    JournalAppendError,
    JournalClosedError,
    JournalCorruptError,
    JournalDuplicateError,
    JournalLineageError,
)
from oma_actors.journal.event import JournalEvent
from oma_actors.journal.jsonl import JsonlRunJournal
from oma_actors.journal.open import open_journal
from oma_actors.journal.options import JournalOptions
from oma_actors.journal.postgres import PostgresRunJournal
from oma_actors.journal.recorder import JournalRecorder
from oma_actors.journal.sql import FencedJournal
from oma_actors.journal.sqlite import SqliteRunJournal
from oma_actors.journal.verify import VerifyFinding, VerifyResult, verify_events, verify_run
from oma_actors.journal.vocabulary import EventDraft, canonical_content_hash

__all__ = [
    "EVENT_TYPES",
    "EncryptingJournal",
    "EventDraft",
    "FencedJournal",
    "InMemoryRunJournal",
    "JournalAppendError",
    "JournalClosedError",
    "JournalCorruptError",
    "JournalDuplicateError",
    "JournalEvent",
    "JournalLineageError",
    "JournalOptions",
    "JournalRecorder",
    "JsonlRunJournal",
    "PostgresRunJournal",
    "RunJournal",
    "SqliteRunJournal",
    "VerifyFinding",
    "VerifyResult",
    "canonical_content_hash",
    "open_event",
    "open_journal",
    "parse_line",
    "peek_seq",
    "read_run",
    "seal_event",
    "to_json_line",
    "verify_events",
    "verify_run",
    "vocabulary",
]

"""A snapshot's ``journalRef``: whether the snapshot depends on its journal, and opening it (D15).

A run saving journal-first (D10) writes its per-turn boundaries, an ``unsafe`` tool's dispatch
record among them, to the journal alone; its snapshot is a compaction point and is not the whole
saved state. Restoring it without its journal would run a dispatched call again. Such a snapshot
says so: its ``journalRef`` carries ``"durable": true`` next to the journal's ``describe()``.
It also names the highest seq of its run the journal was known to hold when it was built
(``"through"``): events a later restore must find there, or the journal lost some (emptied,
truncated, replaced). A snapshot of OMA's mode (``durable=False``) or of a run whose snapshots
stayed the save path (a leased run, an in-memory journal beside a persistent store) has no such
member: its journal only extends it and a restore without it is OMA's (spec JR-11).

``open_journal_ref`` opens the journal a ref names, or raises ``JournalUnavailableError``; it
reads nothing, so a restore refusing here has written nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from oma_actors.errors import JournalUnavailableError
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.journal.jsonl import JsonlRunJournal
from oma_actors.journal.open import journal_beside
from oma_actors.stores.base import layers
from oma_actors.stores.file import FileStore
from oma_actors.stores.redacting import RedactingStore

if TYPE_CHECKING:
    import re
    from collections.abc import Mapping

    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.journal.base import RunJournal

DURABLE_MEMBER = "durable"
"""The ``journalRef`` member saying the snapshot depends on its journal (journal-first saves)."""

DATABASE_KINDS = frozenset({"SqliteRunJournal", "PostgresRunJournal"})
"""Journals kept in the store's own database (``{"store": "same-database", "table": ...}``)."""


THROUGH_MEMBER = "through"
"""The ``journalRef`` member naming the highest seq of the run the journal was known to hold when
the snapshot was built: a journal holding no event of the run from there on lost events."""


def durable_ref(described: Mapping[str, Any], *, through: int = 0) -> dict[str, Any]:
    """The ``journalRef`` of a journal-first run: the journal's ``describe()``, marked durable,
    with ``through`` (when known) the highest seq of the run the journal holds now.

    A JSONL journal's path is made absolute: a restore opens the file its snapshot names by
    itself, from whatever directory it runs in; a relative path read from another one named
    another run's journal (or none), which the restore then folded and appended to.
    """
    ref = {**described, DURABLE_MEMBER: True}
    path = ref.get("path")
    if ref.get("kind") == "JsonlRunJournal" and isinstance(path, str) and path:
        ref["path"] = os.path.abspath(path)
    if through > 0:
        ref[THROUGH_MEMBER] = through
    return ref


def _anchored(ref: Mapping[str, Any], path: str, store: object) -> str:
    """A JSONL journal's ``path`` as a restore opens it: a relative one (written by versions
    before paths were made absolute, ``durable_ref``) is the file beside the store's own file,
    never one under the restoring process's directory (there it named another run's journal,
    which the restore folded and appended to, re-running the run's calls).

    Raises:
        JournalUnavailableError: the path is relative and the store is no file store to
            anchor it (pass ``journal=``).
    """
    if os.path.isabs(path):
        return path
    state_file = _state_file(store)
    if state_file is None:
        raise JournalUnavailableError(
            ref,
            f"the journal path {path!r} is relative and the store has no file to anchor it: "
            "pass journal=",
        )
    return os.path.join(os.path.dirname(state_file), path)


def _redaction_of(store: object) -> tuple[re.Pattern[str], ...] | None:
    """The extra patterns of the ``RedactingStore`` ``store`` is or wraps, or ``None``."""
    found = next((layer for layer in layers(store) if isinstance(layer, RedactingStore)), None)
    return None if found is None else found.patterns


def _state_file(store: object) -> str | None:
    """The state file of the ``FileStore`` ``store`` is or wraps, or ``None``."""
    found = next((layer for layer in layers(store) if isinstance(layer, FileStore)), None)
    return None if found is None else found.path


def journal_through(snapshot: CheckpointSnapshot) -> int:
    """The ``through`` seq of a journal-first snapshot's ref (0: none, or not journal-first)."""
    ref = adopt_journal_fields(snapshot).journal_ref
    if ref is None or ref.get(DURABLE_MEMBER) is not True:
        return 0
    through = ref.get(THROUGH_MEMBER)
    return through if isinstance(through, int) and not isinstance(through, bool) else 0


def depends_on_journal(snapshot: CheckpointSnapshot) -> bool:
    """Whether ``snapshot`` was saved journal-first, so that it restores only with its journal."""
    ref = adopt_journal_fields(snapshot).journal_ref
    return ref is not None and ref.get(DURABLE_MEMBER) is True


def open_journal_ref(ref: Mapping[str, Any] | None, store: object = None) -> RunJournal:
    """The journal ``ref`` names, opened without reading it (the caller closes it).

    Args:
        ref: the snapshot's ``journalRef``.
        store: the store the snapshot was read from: a database journal (``"store":
            "same-database"``) is the one in that store's database.

    Raises:
        JournalUnavailableError: ``ref`` is missing, names a JSONL file that does not exist, an
            in-memory journal (it lived only in the process that wrote it), a database journal
            whose database ``store`` is not, a sealed journal (the keys are the caller's), or a
            kind this build does not know.
    """
    if ref is None:
        raise JournalUnavailableError(None, "the snapshot names no journal")
    kind = ref.get("kind")
    if ref.get("sealed") is True:
        # Its payloads are sealed (EncryptingJournal): read without the keys, every event
        # would fail the fold, and the keys are the caller's to give, never the snapshot's.
        raise JournalUnavailableError(
            ref,
            "the journal is sealed: pass journal=EncryptingJournal(<journal>, <keyring>) (oma: "
            "set OMA_ENCRYPTION_KEYS)",
        )
    if kind == "JsonlRunJournal":
        path = ref.get("path")
        if not isinstance(path, str) or not path:
            raise JournalUnavailableError(ref, "the JSONL journal's path is missing")
        path = _anchored(ref, path, store)
        # A missing file would read as an empty journal (JR-04), which is exactly the silent
        # restore without the journal this refuses: the dispatch records would be gone.
        if not os.path.lexists(path):
            raise JournalUnavailableError(ref, f"no file at {path}")
        # Beside a redacting store, the attempt's events are redacted by the store's rules, as
        # the run's own journal had to be (``journal_setup.check_at_rest``).
        return JsonlRunJournal(path, redact=_redaction_of(store))
    if kind in DATABASE_KINDS:
        journal = journal_beside(store)
        # The same kind and table in the snapshot's own database: a snapshot copied to another
        # store must not fold another database's journal as its own.
        if journal is None or journal.describe() != {
            key: ref.get(key) for key in ("kind", "store", "table")
        }:
            raise JournalUnavailableError(
                ref, f"its {kind} is not in the database of the store the snapshot was read from"
            )
        return journal
    if kind == "InMemoryRunJournal":
        raise JournalUnavailableError(
            ref, "an in-memory journal lives only in the process that wrote it"
        )
    raise JournalUnavailableError(ref, f"unknown journal kind {kind!r}")

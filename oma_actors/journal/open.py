"""``open_journal(uri)``: the run journal a URI names, where ``open_store(uri)`` is (D15).

=====================================  ===========================================================
``file:///abs/run.jsonl``, a path      ``JsonlRunJournal`` of that file
``sqlite:///abs/state.db``             ``SqliteRunJournal``: table ``oma_kv_journal`` of that file
``postgresql://user@host:5432/db``     ``PostgresRunJournal``: table ``<table>_journal`` beside the
                                       store's table (``?table=``, default ``oma_kv``)
``memory://``                          a new ``InMemoryRunJournal``
=====================================  ===========================================================

The URI is parsed by the store's own parser (``parse_store_uri``), so every spelling, alias
(``postgres://``) and ``?table=`` rule of ``open_store`` holds here too: a store URI and the
journal URI of the same database name the same database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.errors import ConfigurationError
from oma_actors.journal.base import InMemoryRunJournal
from oma_actors.journal.jsonl import JsonlRunJournal
from oma_actors.journal.postgres import PostgresRunJournal
from oma_actors.journal.sqlite import SqliteRunJournal
from oma_actors.stores.postgres import PostgresStore
from oma_actors.stores.rows import redact
from oma_actors.stores.sqlite import SqliteStore
from oma_actors.stores.uri import parse_store_uri

if TYPE_CHECKING:
    from oma_actors.journal.base import RunJournal
    from oma_actors.journal.sql import SqlRunJournal


DATABASE_STORE_KINDS = frozenset({"sqlite", "postgresql"})
"""Store kinds (``parse_store_uri``) whose database keeps its runs' journals (``open_journal``
of the store's URI is a ``SqlRunJournal``)."""


def journal_beside(store: object) -> SqlRunJournal | None:
    """The journal in ``store``'s own database (opened on first use), or ``None`` for a store
    whose database keeps none (memory, file, Redis, a wrapper)."""
    if isinstance(store, SqliteStore):
        return SqliteRunJournal(store.path)
    if isinstance(store, PostgresStore):
        return PostgresRunJournal(store.dsn, store_table=store.table)
    return None


def open_journal(uri: str) -> RunJournal:
    """The run journal ``uri`` names (see the module docstring); it opens on first use.

    Close it with ``await journal.close()``.

    Raises:
        ConfigurationError: an unknown scheme, a malformed URI, or a kind of store that keeps no
            journal (``redis://``); the message names the URI (never its password).
    """
    target = parse_store_uri(uri)
    if target.kind == "memory":
        return InMemoryRunJournal()
    if target.kind == "file":
        return JsonlRunJournal(target.location)
    if target.kind == "sqlite":
        return SqliteRunJournal(target.location)
    if target.kind == "postgresql":
        return PostgresRunJournal(target.location, store_table=target.option or "oma_kv")
    raise ConfigurationError(
        f"journal URI {redact(uri)}: a {target.kind} store keeps no run journal "
        "(use file://, sqlite://, postgresql:// or memory://)"
    )


__all__ = ["DATABASE_STORE_KINDS", "journal_beside", "open_journal"]

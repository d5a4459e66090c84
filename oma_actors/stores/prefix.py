"""Key prefixes as ranges: what ``list(prefix=)`` returns, and how a database finds it fast.

Every key that starts with a prefix ``p`` sorts (by code point, which is also the byte order of
UTF-8 and what SQLite's ``BINARY`` and PostgreSQL's ``"C"`` collation compare) at or after ``p``
and before ``upper_bound(p)``. So a database answers a prefix listing with a range scan on its
key index, and no user text ever becomes a ``LIKE`` or glob pattern whose ``%``, ``_``, ``*``
or ``[`` would match more than it says.

``list_under`` is how the runtime lists by prefix on any store: every store of this package
takes ``prefix``, and a user-written store whose ``list()`` does not (the OMA surface has
none) is listed whole and filtered here, with the same result.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from oma_actors.stores.base import MemoryEntry, MemoryStore

_MAX_CHAR = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def upper_bound(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix``; ``None``: no bound.

    The last character that can be raised is raised by one code point (skipping the
    surrogates, which no stored UTF-8 text holds) and what follows it is dropped. An empty
    prefix, or one made only of U+10FFFF, has no upper bound: every key from ``prefix`` on
    matches.
    """
    stem = prefix
    while stem:
        last = ord(stem[-1])
        if last < _MAX_CHAR:
            following = last + 1
            if following in _SURROGATES:
                following = _SURROGATES.stop
            return stem[:-1] + chr(following)
        stem = stem[:-1]
    return None


def matching(entries: Iterable[MemoryEntry], prefix: str | None) -> list[MemoryEntry]:
    """The entries whose key starts with ``prefix`` (all for ``None`` or ``""``), in order."""
    if not prefix:
        return list(entries)
    return [entry for entry in entries if entry.key.startswith(prefix)]


def takes_prefix(store: MemoryStore) -> bool:
    """Whether ``store.list`` accepts a ``prefix`` argument (every store of this package does)."""
    try:
        parameters = inspect.signature(store.list).parameters
    except (TypeError, ValueError):  # a callable without a readable signature
        return False
    return "prefix" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


async def list_under(store: MemoryStore, prefix: str | None) -> list[MemoryEntry]:
    """The entries of ``store`` whose key starts with ``prefix``, in the store's order.

    ``None`` or ``""`` lists every entry. A store whose ``list()`` takes no ``prefix`` (a
    user-written OMA store) is listed whole and filtered, so every store answers alike.
    """
    if not prefix:
        return await store.list()
    if takes_prefix(store):
        return await store.list(prefix=prefix)
    return matching(await store.list(), prefix)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnreadableEntry:
    """A stored value a listing could not open (``list_each``).

    Attributes:
        key: the entry's key.
        error: why it could not be opened (the store's one-line error).
        metadata: the entry's metadata, which is never sealed.
    """

    key: str
    error: str
    metadata: dict[str, Any] | None = None


async def list_each(store: MemoryStore, prefix: str) -> list[MemoryEntry | UnreadableEntry]:
    """``list_under(store, prefix)``, each value read on its own: a value the store cannot
    open (an ``EncryptingStore``'s sealed under another key, tampered) is an
    ``UnreadableEntry`` in its place, and the others are returned all the same.

    For listings of many runs (checkpoints, run records, approval rows), where one run's bad
    value must not hide or fail the others. A store that opens values tells it by a
    ``list_each(prefix)`` of its own; any other store's values are returned as listed.

    Raises:
        StoreError: the store cannot be listed.
    """
    each = getattr(store, "list_each", None)
    if callable(each):
        listed: list[MemoryEntry | UnreadableEntry] = await each(prefix)
        return listed
    return list(await list_under(store, prefix))


__all__ = ["UnreadableEntry", "list_each", "list_under", "matching", "takes_prefix", "upper_bound"]

"""Entry fields as database columns, shared by the SQLite, PostgreSQL and Redis stores.

A database store keeps each entry as a row: the value as text, the metadata as compact JSON text
(never JSONB: that would reorder keys and reject ``\\u0000``), ``created_at`` as an ISO-8601
timestamp with microseconds, and ``expires_at_turn``. The conversions, and the one place that
strips a password from a URI before it appears in an error, live here as pure functions.

A database's text is UTF-8, which cannot hold a lone surrogate (``"\\ud800"``, a string Python
and JavaScript both allow). Metadata is JSON text we write, so a lone surrogate in it is
escaped as ``JSON.stringify`` escapes it and reads back as itself. A key or value is the
caller's own text: one holding a lone surrogate is refused (``refusing_lone_surrogates``) with a
``StoreError`` naming the entry, its transaction rolled back, so nothing of the write is stored.
Rewriting it would store another text than the one given (or one only this build reads back);
PostgreSQL's text cannot hold it at all, and SQLite keeps to the same rule.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.jsontext import compact_text
from oma_actors.stores.base import MemoryEntry, Put

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

    from oma_actors.stores.base import Expect, Write


def encode_metadata(metadata: Mapping[str, Any] | None, key: str) -> str | None:
    """The metadata of ``key`` as compact JSON text, or ``None`` when there is none.

    A lone surrogate is escaped as ``JSON.stringify`` escapes it (``compact_text``): the text
    always encodes as UTF-8, and ``decode_metadata`` reads the surrogate back.

    Raises:
        StoreError: The metadata is not JSON-serializable (the caller has written nothing yet).
    """
    if metadata is None:
        return None
    try:
        return compact_text(dict(metadata))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"metadata of entry {key!r} is not JSON-serializable: {exc}") from exc


def encode_batch(writes: Sequence[Write]) -> list[tuple[Write, str | None]]:
    """Each write with its encoded metadata, so a batch is rejected before any of it is sent.

    Raises:
        StoreError: Some ``Put``'s metadata is not JSON-serializable.
    """
    return [
        (write, encode_metadata(write.metadata, write.key) if isinstance(write, Put) else None)
        for write in writes
    ]


@contextmanager
def refusing_lone_surrogates(
    store: str, checks: Iterable[Expect], writes: Iterable[Write]
) -> Iterator[None]:
    """Turn a driver's failure to encode a key or value as UTF-8 into ``unencodable``'s error.

    Wraps the whole store call: the driver failed before its statement ran, inside the
    transaction, which is rolled back (a lone surrogate can fail nothing else). The fast path
    checks nothing; only a failure is looked into.

    Raises:
        StoreError: a key or value of ``checks`` or ``writes`` holds a lone surrogate.
    """
    try:
        yield
    except Exception as exc:
        error = unencodable(store, checks, writes) if _caused_by_encoding(exc) else None
        if error is not None:
            raise error from None
        raise


def unencodable(store: str, checks: Iterable[Expect], writes: Iterable[Write]) -> StoreError | None:
    """The error naming the first entry whose key or value holds a lone surrogate, and where;
    ``None`` when none does."""
    texts: list[tuple[str, str, str]] = [(check.key, "key", check.key) for check in checks]
    for write in writes:
        texts.append((write.key, "key", write.key))
        if isinstance(write, Put):
            texts.append((write.key, "value", write.value))
    for key, part, text in texts:
        index = _lone_surrogate(text)
        if index is not None:
            return StoreError(
                f"{store}: the {part} of entry {key!r} holds a lone surrogate "
                f"({text[index]!r} at index {index}), which a database's UTF-8 text cannot "
                "hold (surrogates not allowed); nothing of the write was stored"
            )
    return None


def _caused_by_encoding(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised from, a ``UnicodeEncodeError`` (a driver wraps it:
    sqlite3's is raised as ``StoreError`` from it, asyncpg's as ``DataError`` from it)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, UnicodeEncodeError):
            return True
        seen = seen.__cause__
    return False


def _lone_surrogate(text: str) -> int | None:
    """The index of the first surrogate code point of ``text``, if it holds one."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def decode_metadata(store: str, key: str, text: str | None) -> dict[str, Any] | None:
    """The metadata column of ``key`` as a dict.

    Raises:
        CorruptStoreError: The column holds something other than a JSON object.
    """
    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise CorruptStoreError(store, f"metadata of entry {key!r} is not valid JSON") from exc
    if not isinstance(parsed, dict):
        raise CorruptStoreError(store, f"non-object metadata in entry {key!r}")
    return parsed


def encode_time(moment: datetime) -> str:
    """``moment`` as ISO-8601 UTC text with microseconds, which sorts like the time itself."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def decode_time(store: str, key: str, text: str) -> datetime:
    """An ``encode_time`` text back as an aware datetime.

    Raises:
        CorruptStoreError: The text is not an ISO-8601 timestamp.
    """
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError) as exc:
        raise CorruptStoreError(store, f"invalid created_at {text!r} in entry {key!r}") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def make_row_entry(
    store: str,
    key: str,
    value: str,
    metadata: str | None,
    created_at: str | datetime,
    expires_at_turn: int | None,
) -> MemoryEntry:
    """The ``MemoryEntry`` of one row.

    Raises:
        CorruptStoreError: A column does not hold what the store writes there.
    """
    if not isinstance(value, str):
        raise CorruptStoreError(store, f"value of entry {key!r} is not text")
    if isinstance(created_at, str):
        created_at = decode_time(store, key, created_at)
    return MemoryEntry(
        key=key,
        value=value,
        metadata=decode_metadata(store, key, metadata),
        created_at=created_at,
        expires_at_turn=expires_at_turn,
    )


def redact(uri: str) -> str:
    """``uri`` without its password, for error messages, logs and canonical store URIs.

    Masked: the password of the user part (``user:***@``), and every query option that names a
    password or a secret (``?password=``, ``sslpassword=``: asyncpg and redis-py connect with
    them). A password holding an unescaped ``/``, ``?`` or ``#`` ends the URI's host part early
    (``urlsplit`` then sees no user part at all): everything between ``://`` and its ``@`` is
    then masked but the user name, so a malformed URI's error never echoes the password either.
    """
    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:
        return uri.split("@", 1)[-1] if "@" in uri else uri
    if password is None and "@" not in parts.netloc and _cut_password(uri, parts.netloc):
        scheme, rest = uri.split("://", 1)
        user, host = rest.split(":", 1)[0], rest.rsplit("@", 1)[1]
        return f"{scheme}://{user}:***@{host}"
    masked = parts
    if password is not None:
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0].split(":", 1)[0]
        masked = masked._replace(netloc=f"{user}:***@{netloc[1]}")
    if parts.query:
        masked = masked._replace(query=_masked_query(parts.query))
    # Unchanged, the URI is returned as written (``urlunsplit`` would respell ``sqlite:///x``).
    return uri if masked == parts else urlunsplit(masked)


_SECRET_OPTION = re.compile(r"pass|secret|token", re.IGNORECASE)


def _masked_query(query: str) -> str:
    """``query`` with the value of each option named like a secret replaced by ``***``."""
    options = parse_qsl(query, keep_blank_values=True)
    if not any(_SECRET_OPTION.search(name) for name, _ in options):
        return query  # as written: an untouched URI stays byte for byte what it was
    return urlencode(
        [(name, "***" if _SECRET_OPTION.search(name) else value) for name, value in options],
        safe="*",
    )


def _cut_password(uri: str, netloc: str) -> bool:
    """Whether a ``/``, ``?`` or ``#`` in a password cut ``uri``'s user part off its host:
    there is an ``@`` after ``://`` and either it comes before any ``?`` (an ``@`` in a query
    is a value's) or what ``urlsplit`` took for the host has no valid port (``user:pa`` of
    ``user:pa?ss@host``)."""
    if "://" not in uri:
        return False
    rest = uri.split("://", 1)[1]
    at, query = rest.find("@"), rest.find("?")
    if at < 0 or rest.startswith("/"):  # no user part (``file:///a@b``: a path's ``@``)
        return False
    if query < 0 or at < query:
        return True
    port = netloc.rpartition(":")[2] if ":" in netloc else ""
    return not port.isdigit() if port else False


__all__ = [
    "decode_metadata",
    "decode_time",
    "encode_batch",
    "encode_metadata",
    "encode_time",
    "make_row_entry",
    "redact",
    "refusing_lone_surrogates",
    "unencodable",
]

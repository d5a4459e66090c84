"""Compact JSON text by orjson wherever orjson writes the very text the standard encoders write.

A snapshot's messages, the FileStore's entries and a journal line are serialized at every save;
``json.dumps`` builds a ``JSONEncoder`` per call and walks in C at about a tenth of orjson's
speed (a 1000-turn run's snapshot encodes in 16 ms instead of 28, measured in ``bench/history.py``
terms). orjson's text equals ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``
and ``JSON.stringify(value)`` for a value built of plain JSON types alone:

- ``dict`` (orjson refuses a key that is not a string), ``list``, ``tuple``, ``str``, ``bool``,
  ``None``, and ``int`` within 2**53 (``OPT_STRICT_INTEGER`` refuses the others), each of that
  exact type (a subclass, an ``Enum``, a ``UUID`` or a dataclass is left to the caller's encoder,
  which serializes or refuses it as it always did);
- no ``float`` (orjson lays out ``1e+16``, ``1.0`` and ``-0.0`` unlike both, and writes ``NaN`` as
  ``null`` where ``allow_nan=False`` refuses it);
- no lone surrogate (orjson refuses it; ``json.dumps`` writes it raw, JavaScript escapes it).

``compact_text`` is ``compact_dumps`` as ``JSON.stringify`` writes a lone surrogate (``\\udxxx``,
lowercase hex): the text every snapshot, message and entry metadata we store is written in, so
that it always encodes as UTF-8 (a database's text column and a file alike).

Strings escape identically (``"``, ``\\``, the short forms of ``\\b \\f \\n \\r \\t``, other control
characters as lowercase ``\\u00xx``, everything else as it is: every code point is checked in
``tests/domain/test_jsontext.py``). Anything else gets ``None`` from ``plain_text`` and the
standard encoder's own text (or error) from the others.

Reading the other way, ``exact_loads`` gives orjson's value (several times the ``json`` module's
speed) only where it is the value ``json.loads`` gives, and says so otherwise (``NotExact``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from collections.abc import Callable

_OPTIONS = (
    orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
"""Refuse (``TypeError``) every value orjson would write unlike the standard encoders."""

_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What ``json.dumps`` builds for those arguments on every call, built once."""


def plain_text(value: Any) -> str | None:
    """orjson's text of ``value`` if it is plain JSON (see the module docstring), else ``None``."""
    if not _plain(value):
        return None
    try:
        return orjson.dumps(value, option=_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError: a large integer, a lone surrogate, a non-str key
        return None


def compact_dumps(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``.

    Raises:
        TypeError, ValueError: as ``json.dumps`` (a value that is not JSON, a NaN).
    """
    text = plain_text(value)
    return _COMPACT.encode(value) if text is None else text


def compact_text(value: Any) -> str:
    """``compact_dumps(value)`` with each lone surrogate escaped as ``JSON.stringify`` escapes it.

    Its text always encodes as UTF-8, and reads back (``json.loads``, ``JSON.parse``) as the same
    value (a high surrogate right before a low one reads back as the character the two make,
    as they are that character to JavaScript). orjson's text is taken as it is: orjson refuses
    a lone surrogate, so its text holds none. Only the standard encoder's text is checked
    (``escape_lone_surrogates``).

    Raises:
        TypeError, ValueError: as ``compact_dumps``.
    """
    text = plain_text(value)
    return escape_lone_surrogates(_COMPACT.encode(value)) if text is None else text


def escape_lone_surrogates(text: str) -> str:
    """JSON ``text`` with each surrogate code point written ``\\udxxx``, as ``JSON.stringify``
    writes a lone surrogate (ES2019); JSON text without one is returned as it is.

    In JSON text a surrogate can only stand inside a string literal, where its escape reads
    back as the same code point. An ASCII text costs nothing (``str.isascii`` reads a flag);
    another is tried as UTF-8, which a surrogate alone fails (twice the speed of a search).
    The escape is the codec's ``backslashreplace``: for a code point below U+10000 it writes
    ``\\u`` and four lowercase hex digits, ``JSON.stringify``'s very escape, in C (a
    substitution calling back into Python costs five times the encoding of the whole text).
    """
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def string_literal(text: str) -> str:
    """``json.dumps(text, ensure_ascii=False)``: the quoted JSON string literal of ``text``."""
    if type(text) is str:
        try:
            return orjson.dumps(text).decode()
        except TypeError:  # a lone surrogate: written raw, as ``json.dumps`` writes it
            pass
    return json.dumps(text, ensure_ascii=False)


class NotExact(Exception):
    """orjson cannot vouch for the text: read it with ``json.loads`` (its value or its error)."""


def exact_loads(data: bytes | str) -> Any:
    """``json.loads(data)``'s value, read by orjson.

    orjson reads an integer beyond 64 bits as a float where ``json`` keeps it exact, so a text
    holding a run of 19 or more digits is left to ``json``; so is every text orjson refuses
    (invalid UTF-8, a lone surrogate escape, ``NaN``, ``1e400``, nesting past its limit, ...),
    which ``json`` then reads (perhaps with the caller's ``parse_constant``) or refuses with
    its own error.

    Raises:
        NotExact: the caller must use ``json.loads``.
    """
    if not isinstance(data, bytes):
        # Checked and read as UTF-8: ``str.translate`` maps through a dict, about 3x the
        # table of ``bytes.translate`` (and orjson reads either at one speed).
        try:
            data = data.encode()
        except UnicodeEncodeError:  # a lone surrogate: orjson refuses it, ``json`` reads it
            raise NotExact from None
    if has_long_digits(data):
        raise NotExact
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise NotExact from None


def has_long_digits(data: bytes) -> bool:
    """Whether ``data`` holds a run of 19 or more ASCII digits, where orjson may read an integer
    as a float (``exact_loads`` leaves such a text to ``json``).

    One call over many texts joined by a non-digit byte answers for each of them (a run cannot
    cross the separator): a reader of thousands of lines checks them all at once (P5).
    """
    return _LONG_DIGITS_BYTES in data.translate(_DIGITS_AS_ZERO_BYTES)


def reject_constant(name: str) -> Any:
    """A ``parse_constant`` for ``json.loads`` / :func:`loads` that refuses ``NaN``,
    ``Infinity`` and ``-Infinity``: Python reads them, ``JSON.parse`` (and so OMA) does not.

    Raises:
        ValueError: always, naming the constant.
    """
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes | str, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """``json.loads(data, parse_constant=parse_constant)`` (bytes decoded as UTF-8 first), by
    orjson where its value is the same (``exact_loads``).

    Raises:
        UnicodeDecodeError, ValueError, RecursionError: as ``json.loads``.
    """
    try:
        return exact_loads(data)
    except NotExact:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_constant=parse_constant)


# A run of 19 digits may be an integer orjson reads as a float (above 2**63 - 1).
_DIGITS_AS_ZERO_BYTES = bytes.maketrans(b"0123456789", b"0000000000")
_LONG_DIGITS_BYTES = b"0" * 19


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only plain JSON containers and scalars, and no float.

    A walk over the containers only (strings are not looked into): about a microsecond for a
    journal event, where scanning orjson's output for a float's layout costs ten times orjson.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return False  # a float, a subclass, any other type: the caller's encoder decides
    return True


__all__ = [
    "NotExact",
    "compact_dumps",
    "compact_text",
    "escape_lone_surrogates",
    "exact_loads",
    "loads",
    "plain_text",
    "reject_constant",
    "string_literal",
]

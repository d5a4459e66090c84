"""JSON text exactly as JavaScript's ``JSON.stringify`` writes it, for OMA-identical journal lines.

Python's ``json.dumps`` differs from ``JSON.stringify`` in three places that matter here: number
layout (``1e-07`` against ``1e-7``, ``1.0`` against ``1``), non-finite numbers (JavaScript writes
``null``), and lone surrogates (JavaScript escapes them, Python would write unencodable text).
Strings otherwise escape identically with ``ensure_ascii=False``.

The common case goes through ``orjson`` (``jsontext.plain_text``: C, no walk in Python): for a
value of plain JSON types without a float, its text is ``JSON.stringify``'s (strings escape
alike, every code point checked in tests/journal_facts). A value holding a float (orjson lays out
``1.0``, ``1e+16``, ``-0.0`` unlike JavaScript), anything not of a plain JSON type, and every
value orjson refuses (an integer past 2**53, a lone surrogate) is written, or refused, by the
reference encoder below instead.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from oma_actors.jsontext import plain_text

_MAX_SAFE_INTEGER = 2**53 - 1
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_encode_string = json.encoder.encode_basestring


def js_dumps(value: Any, *, sort_keys: bool = False) -> str:
    """Serialise a JSON value (dict, list, str, int, float, bool, None) as ``JSON.stringify`` does.

    Args:
        value: the value; dict keys must be strings.
        sort_keys: sort object keys recursively by UTF-16 code units, as JavaScript's default
            ``Array.prototype.sort`` does (the canonical form of content hashes).

    Raises:
        TypeError: the value holds something that is not a JSON value.
    """
    if not sort_keys:
        text = plain_text(value)  # orjson, where it writes what the reference writes
        if text is not None:
            return text
    return reference_dumps(value, sort_keys=sort_keys)


def reference_dumps(value: Any, *, sort_keys: bool = False) -> str:
    """``js_dumps`` without its ``orjson`` path: the walk in Python every byte is checked against.

    Raises:
        TypeError: the value holds something that is not a JSON value.
    """
    parts: list[str] = []
    _write(value, parts, sort_keys)
    return "".join(parts)


def js_number(number: float) -> str:
    """Format a number like ECMAScript ``Number::toString`` (non-finite numbers become ``null``)."""
    if not math.isfinite(number):
        return "null"
    if number == 0:
        return "0"
    if number < 0:
        return "-" + js_number(-number)
    # repr() yields the shortest round-trip digits, as JavaScript does; only the layout differs.
    _, digit_tuple, exponent = Decimal(repr(float(number))).as_tuple()
    assert isinstance(exponent, int)
    all_digits = "".join(map(str, digit_tuple))
    digits = all_digits.rstrip("0")
    exponent += len(all_digits) - len(digits)
    k = len(digits)
    n = exponent + k
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


def _string(text: str) -> str:
    encoded: str = _encode_string(text)
    if _SURROGATE.search(encoded) is None:
        return encoded
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


def _utf16_key(item: tuple[str, Any]) -> bytes:
    # JavaScript compares strings by UTF-16 code unit, Python by code point: they disagree once a
    # key holds a character past U+FFFF (a surrogate pair, 0xD8xx) next to one in U+E000..U+FFFF.
    # Big-endian UTF-16 bytes compare exactly as code units do.
    key = item[0]
    if not isinstance(key, str):
        raise TypeError(f"object key {key!r} is not a string")
    return key.encode("utf-16-be", "surrogatepass")


def _write(value: Any, parts: list[str], sort_keys: bool) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, str):
        parts.append(_string(value))
    elif isinstance(value, int):
        # A JavaScript Number is a double: an integer past 2**53 prints as its nearest double.
        safe = -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER
        parts.append(str(value) if safe else js_number(float(value)))
    elif isinstance(value, float):
        parts.append(js_number(value))
    elif isinstance(value, dict):
        items = sorted(value.items(), key=_utf16_key) if sort_keys else value.items()
        parts.append("{")
        first = True
        for key, item in items:
            if not isinstance(key, str):
                raise TypeError(f"object key {key!r} is not a string")
            parts.append("" if first else ",")
            first = False
            parts.append(_string(key))
            parts.append(":")
            _write(item, parts, sort_keys)
        parts.append("}")
    elif isinstance(value, list | tuple):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _write(item, parts, sort_keys)
        parts.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")

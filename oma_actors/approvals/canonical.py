"""Canonical JSON, request hashes and request ids (spec AP-07..AP-10, AP-11).

Everything here is pure. ``stable_json`` is the one serialisation an approval hash is taken over,
so it must never depend on dict insertion order or on how Python happens to print a float: keys
are sorted by UTF-16 code units and numbers are written the way JavaScript's ``JSON.stringify``
writes them (``1.0`` -> ``1``, ``1e21`` -> ``1e+21``, and an int beyond 2**53 as the double
JavaScript reads it as: ``10**30`` -> ``1e+30``), which keeps our hashes equal to OMA's.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from decimal import Decimal
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from oma_actors.errors import DurableApprovalError

# The ledger's keys are spelled in the reserved keyspace; re-exported here for oma_actors.approvals.
from oma_actors.keyspace import APPROVAL_KEY_PREFIX as APPROVAL_KEY_PREFIX
from oma_actors.keyspace import approval_key as approval_key
from oma_actors.readable import shorten

if TYPE_CHECKING:
    from collections.abc import Mapping

VALIDATION = "APPROVAL_VALIDATION_ERROR"
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# Lone surrogates cannot be encoded as UTF-8; JSON.stringify escapes them, and so do we.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# What JavaScript's String.prototype.trim removes: WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP U+FEFF
# and every Zs character) and LineTerminator (LF, CR, U+2028, U+2029). Python's str.strip() differs:
# it also removes U+001C..U+001F and U+0085, and keeps U+FEFF.
_JS_TRIMMED = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# The largest integer a JavaScript Number (an IEEE double) holds exactly (Number.MAX_SAFE_INTEGER).
_MAX_SAFE_INTEGER = 2**53 - 1
_PLAIN_TYPES = frozenset({type(None), bool, int, float, str, list, tuple, dict, MappingProxyType})


def stable_json(value: object) -> str:
    """Serialise ``value`` as canonical, compact JSON (AP-07).

    Accepted: ``None``, ``bool``, ``int`` (one beyond 2**53 is written as the double JavaScript
    reads it as), finite ``float``, ``str``, ``list``/``tuple`` (arrays, in order) and
    ``dict``/``MappingProxyType`` with ``str`` keys (objects, keys sorted by UTF-16 code units
    like JavaScript's default sort). Subclasses and every other type are refused, so the text
    (and therefore a hash) can never depend on a class's own idea of its JSON form.

    Args:
        value: The value to serialise.

    Returns:
        The canonical JSON text.

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` naming the path (``$.a[0].b``) of
            the first value that is not canonical JSON: a non-finite number (or an int too large
            for a double), a cycle, a non-string key or an unsupported type.
    """
    return _serialise(value, sort_keys=True)


def ordered_json(value: object) -> str:
    """Serialise ``value`` as ``JSON.stringify`` does: ``stable_json`` with keys in given order.

    A ledger row is stored in this form: OMA writes its rows with ``JSON.stringify``, so the
    members keep the order they were built (or read) in, and a row re-written with a decision
    keeps the order of the row it was read from. Only hashes use the sorted ``stable_json``.

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` as ``stable_json`` does.
    """
    return _serialise(value, sort_keys=False)


def js_trim(text: str) -> str:
    """``text`` with the characters JavaScript's ``String.prototype.trim`` removes stripped.

    OMA trims run ids, boundaries and reviewer ids with ``trim()`` before it hashes, stores or
    checks them, so we must trim exactly the same set: ``"r\\x1c"`` stays as it is (Python's
    ``str.strip()`` would drop the ``\\x1c`` and give another request id) and a leading U+FEFF
    goes (``str.strip()`` keeps it).
    """
    return text.strip(_JS_TRIMMED)


def _serialise(value: object, *, sort_keys: bool) -> str:
    parts: list[str] = []
    try:
        _write(value, "$", parts, set(), sort_keys)
    except RecursionError:
        raise DurableApprovalError(VALIDATION, "value is nested too deeply for JSON") from None
    return "".join(parts)


def approval_hash_input(scope: str, boundary: str, content: Mapping[str, Any]) -> str:
    """The exact text a request hash is taken over: ``stable_json({scope, boundary, content})``.

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` if ``content`` is not canonical JSON.
    """
    return stable_json({"scope": scope, "boundary": boundary, "content": content})


def hash_approval_request(scope: str, boundary: str, content: Mapping[str, Any]) -> str:
    """The request hash: SHA-256 hex of ``approval_hash_input`` (AP-08).

    ``reason`` and ``requested_at`` are not part of it, and key order cannot change it. The
    boundary is hashed exactly as given (``create_approval_request`` trims it first).

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` if ``content`` is not canonical JSON.
    """
    text = approval_hash_input(scope, boundary, content)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_approval_edit(request_hash: str, edited_input: Mapping[str, Any]) -> str:
    """The hash binding an edited tool input to the request it approves (decision D17).

    SHA-256 hex of ``stable_json({"editedInput", "requestHash"})``: a stored edit changed after
    the decision no longer matches it, and neither does the edit moved onto another request.
    """
    text = stable_json({"editedInput": edited_input, "requestHash": request_hash})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def approval_request_id(run_id: str, scope: str, boundary: str, request_hash: str) -> str:
    """The deterministic request id (AP-09).

    ``"apr_"`` plus the first 32 hex digits of SHA-256 over ``run_id``, ``scope``, ``boundary``
    and ``request_hash`` joined by newlines; ``run_id`` and ``boundary`` are trimmed as
    JavaScript trims (``js_trim``). The same run, boundary and content therefore always yield the
    same id, and the id OMA gives them.
    """
    joined = "\n".join((js_trim(run_id), scope, js_trim(boundary), request_hash))
    return "apr_" + hashlib.sha256(joined.encode("utf-8")).hexdigest()[:32]


def _write(value: object, path: str, out: list[str], active: set[int], sort_keys: bool) -> None:
    # Exact types on purpose: an IntEnum or a str subclass would print differently from the
    # JSON a reader gets back, and a class's own JSON form is not canonical.
    if type(value) not in _PLAIN_TYPES:
        raise DurableApprovalError(
            VALIDATION, f"value at {path} is a {type(value).__name__}, which is not plain JSON"
        )
    if value is None:
        out.append("null")
    elif isinstance(value, bool):  # before int: bool is an int
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(_js_integer(value, path))
    elif isinstance(value, float):
        out.append(_js_number(value, path))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, list | tuple):
        _enter(value, path, active)
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, f"{path}[{index}]", out, active, sort_keys)
        out.append("]")
        active.discard(id(value))
    else:
        assert isinstance(value, dict | MappingProxyType)
        _write_object(value, path, out, active, sort_keys)


def _write_object(
    value: Mapping[object, Any], path: str, out: list[str], active: set[int], sort_keys: bool
) -> None:
    _enter(value, path, active)
    for key in value:
        if type(key) is not str:
            raise DurableApprovalError(
                VALIDATION, shorten(f"object at {path} has a non-string key {key!r}", 300)
            )
    members = cast("Mapping[str, Any]", value)
    keys = sorted(members, key=_utf16_units) if sort_keys else list(members)
    out.append("{")
    for index, key in enumerate(keys):
        if index:
            out.append(",")
        out.append(_string(key))
        out.append(":")
        _write(value[key], _member_path(path, key), out, active, sort_keys)
    out.append("}")
    active.discard(id(value))


def _enter(container: object, path: str, active: set[int]) -> None:
    # `active` holds the containers on the current path only: a shared (non-cyclic) sub-value
    # referenced twice is fine, a container that contains itself is not.
    if id(container) in active:
        raise DurableApprovalError(VALIDATION, f"value at {path} is a cycle")
    active.add(id(container))


def _utf16_units(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like JavaScript's code-unit string comparison.
    return key.encode("utf-16-be", "surrogatepass")


def _member_path(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{_string(key)}]"


def _string(text: str) -> str:
    encoded = json.dumps(text, ensure_ascii=False)
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", encoded)


def _js_integer(number: int, path: str) -> str:
    """Format an int as ``JSON.stringify`` formats the Number JavaScript reads it as.

    A JavaScript Number is a double: ``JSON.parse`` rounds an integer beyond 2**53 to the nearest
    double, so ``10**30`` prints as ``1e+30`` and ``2**53 + 1`` as ``9007199254740992``. Python's
    ``float(int)`` rounds the same way (to nearest, ties to even).
    """
    if -_MAX_SAFE_INTEGER <= number <= _MAX_SAFE_INTEGER:
        return str(number)  # exact as a double, and below 1e21: the plain digits
    try:
        as_double = float(number)
    except OverflowError:  # JavaScript reads it as Infinity, which is not a JSON number
        raise DurableApprovalError(VALIDATION, f"value at {path} is too large") from None
    return _js_number(as_double, path)


def _js_number(number: float, path: str) -> str:
    """Format a finite float like ECMAScript ``Number::toString`` (shortest round-trip digits)."""
    if not math.isfinite(number):
        raise DurableApprovalError(VALIDATION, f"value at {path} is not a finite number")
    if number == 0:
        return "0"  # also -0.0, as in JavaScript
    if number < 0:
        return "-" + _js_number(-number, path)
    # repr() gives the shortest digits that round-trip, as JavaScript does; only the layout
    # (where the point goes, when to switch to an exponent) differs, and that follows below.
    _, digit_tuple, exponent = Decimal(repr(number)).as_tuple()
    assert isinstance(exponent, int)  # finite, checked above
    all_digits = "".join(map(str, digit_tuple))
    digits = all_digits.rstrip("0")
    exponent += len(all_digits) - len(digits)
    k = len(digits)
    n = exponent + k  # value = 0.digits * 10**n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    sign = "+" if n - 1 >= 0 else "-"
    mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{mantissa}e{sign}{abs(n - 1)}"

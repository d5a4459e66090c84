"""Field rules of a run record: OMA's timestamps and the three nested objects (RS-01).

Pure functions. Every check returns a problem that names the field in OMA's camelCase spelling
(``lease.expiresAt``, ``suspension.pendingApprovalIds[1]``), or ``None``. The record's
constructor turns a problem into ``RUN_VALIDATION_ERROR``; the decoder turns the same problem
into ``RUN_INTEGRITY_ERROR``, because there it means the stored bytes are bad.

Time is kept in whole milliseconds, as JavaScript's ``Date`` keeps it, so a lease computed here
expires at exactly the instant OMA would compute and a timestamp survives a round trip.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from oma_actors.clock import to_iso

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MS: Final = timedelta(milliseconds=1)
# Exactly what Date.prototype.toISOString writes for years 0000-9999.
_ISO_MS: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")

ISO_RULE: Final = "must be an ISO-8601 UTC timestamp with milliseconds (toISOString)"
"""How a timestamp problem is worded."""

CHECKPOINT_REF_KEYS: Final = ("key", "snapshotVersion", "savedAt")
OUTCOME_KEYS: Final = ("code", "message")
SUSPENSION_KEYS: Final = ("suspendedAt", "pendingApprovalIds")


def is_int(value: object) -> bool:
    """Whether ``value`` is a JSON integer (``bool`` is not, unlike in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def to_ms(moment: datetime) -> int:
    """``moment`` as whole milliseconds since the epoch, truncated like ``Date.getTime``."""
    return (moment - EPOCH) // _MS


def from_ms(ms: int) -> datetime:
    """The aware UTC datetime of ``ms`` milliseconds since the epoch (exact, no float)."""
    return EPOCH + ms * _MS


def iso_ms(moment: datetime) -> str:
    """``moment`` written as ``Date.toISOString`` writes it: ``2026-09-01T00:00:00.000Z``."""
    return to_iso(moment)


def parse_iso_ms(text: object) -> datetime | None:
    """The instant of an OMA timestamp, or ``None`` unless ``text`` is exactly that format."""
    if not isinstance(text, str) or _ISO_MS.fullmatch(text) is None:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z").astimezone(UTC)
    except ValueError:
        return None  # 2026-02-30 and friends match the pattern but are not dates


def moment_problem(value: object, field: str) -> str | None:
    """Why ``value`` cannot stand for an instant: it must be a timezone-aware ``datetime``."""
    if not isinstance(value, datetime) or value.utcoffset() is None:
        return f"{field} must be a timezone-aware datetime, got {value!r}"
    return None


def ms_precision(moment: datetime) -> datetime:
    """``moment`` in UTC, truncated to the millisecond OMA's JSON can carry."""
    return from_ms(to_ms(moment))


def _keys_problem(
    value: object, field: str, required: tuple[str, ...], allowed: tuple[str, ...]
) -> str | None:
    if not isinstance(value, dict):
        return f"{field} must be an object, got {type(value).__name__}"
    for key in value:
        if key not in allowed:
            return f"{field}.{key} is not a field of {field} (allowed: {', '.join(allowed)})"
    for key in required:
        if key not in value:
            return f"{field}.{key} is missing"
    return None


def checkpoint_ref_problem(value: object) -> str | None:
    """Why ``value`` is not OMA's ``{key, snapshotVersion, savedAt}`` checkpoint reference."""
    problem = _keys_problem(value, "checkpointRef", CHECKPOINT_REF_KEYS, CHECKPOINT_REF_KEYS)
    if problem is not None or not isinstance(value, dict):
        return problem
    if not isinstance(value["key"], str):
        return f"checkpointRef.key must be a string, got {value['key']!r}"
    if not is_int(value["snapshotVersion"]):
        version = value["snapshotVersion"]
        return f"checkpointRef.snapshotVersion must be an integer, got {version!r}"
    if parse_iso_ms(value["savedAt"]) is None:
        return f"checkpointRef.savedAt {ISO_RULE}, got {value['savedAt']!r}"
    return None


def outcome_problem(value: object) -> str | None:
    """Why ``value`` is not OMA's ``{code, message?}`` outcome."""
    problem = _keys_problem(value, "outcome", ("code",), OUTCOME_KEYS)
    if problem is not None or not isinstance(value, dict):
        return problem
    if not isinstance(value["code"], str):
        return f"outcome.code must be a string, got {value['code']!r}"
    if "message" in value and not isinstance(value["message"], str):
        return f"outcome.message must be a string, got {value['message']!r}"
    return None


def suspension_problem(value: object) -> str | None:
    """Why ``value`` is not OMA's ``{suspendedAt, pendingApprovalIds}`` suspension."""
    problem = _keys_problem(value, "suspension", SUSPENSION_KEYS, SUSPENSION_KEYS)
    if problem is not None or not isinstance(value, dict):
        return problem
    if parse_iso_ms(value["suspendedAt"]) is None:
        return f"suspension.suspendedAt {ISO_RULE}, got {value['suspendedAt']!r}"
    ids = value["pendingApprovalIds"]
    if not isinstance(ids, list):
        return f"suspension.pendingApprovalIds must be a list, got {type(ids).__name__}"
    for index, item in enumerate(ids):
        if not isinstance(item, str):
            return f"suspension.pendingApprovalIds[{index}] must be a string, got {item!r}"
    return None

"""Wall-clock helpers, in one place so the ISO format matches OMA's ``toISOString``."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


def to_iso(moment: datetime) -> str:
    """Format like JavaScript's ``Date.toISOString``: UTC, millisecond precision, ``Z``."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def from_iso(text: str) -> datetime:
    """Parse an ISO-8601 timestamp (``Z`` or offset); raise ``ValueError`` if it is not one."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment

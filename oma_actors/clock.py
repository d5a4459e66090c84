"""Time, in one place: the injectable ``Clock`` and ISO helpers that match OMA's ``toISOString``.

Everything that stamps a time (store entries, snapshots, task updates, approval requests, and
later leases) reads it from a ``Clock`` so a test can drive time with the test kit's
``FakeClock`` instead of sleeping. ``SYSTEM_CLOCK`` is the default everywhere.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock time."""

    def now(self) -> datetime:
        """The current time as an aware UTC datetime."""
        ...

    def unix(self) -> float:
        """The current time in seconds since the Unix epoch."""
        ...


class SystemClock:
    """The real clock: ``datetime.now(UTC)`` and ``time.time()``."""

    def now(self) -> datetime:
        """The current time as an aware UTC datetime."""
        return datetime.now(UTC)

    def unix(self) -> float:
        """The current time in seconds since the Unix epoch."""
        return time.time()


SYSTEM_CLOCK: Clock = SystemClock()
"""The default clock of every component that takes a ``clock`` argument."""


def utcnow() -> datetime:
    """Return the current time of the system clock as an aware UTC datetime."""
    return SYSTEM_CLOCK.now()


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

"""FakeClock: a ``Clock`` that moves only when a test moves it.

Pass it wherever a component takes ``clock=`` (stores, and later leases) and drive time with
``advance`` instead of sleeping::

    clock = FakeClock()
    store = InMemoryStore(clock=clock)
    await store.set("k", "v1")
    clock.advance(60)
    await store.set("k", "v2")  # created_at is still the first write's time
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2025, 1, 1, tzinfo=UTC)
"""Where a ``FakeClock`` starts unless told otherwise: a fixed moment, so runs are repeatable."""


def _moment(value: datetime | float) -> datetime:
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise ValueError(f"a FakeClock needs a timezone-aware datetime, got {value!r}")
        return value.astimezone(UTC)
    if isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"a FakeClock needs a datetime or finite Unix seconds, got {value!r}")
    return datetime.fromtimestamp(value, UTC)


class FakeClock:
    """A ``Clock`` whose time changes only through ``advance`` and ``set``.

    Args:
        start: The initial time: an aware ``datetime`` or seconds since the Unix epoch.

    Raises:
        ValueError: ``start`` is a naive datetime or not a finite number.
    """

    def __init__(self, start: datetime | float = DEFAULT_START) -> None:
        self._now = _moment(start)

    def now(self) -> datetime:
        """The current fake time as an aware UTC datetime."""
        return self._now

    def unix(self) -> float:
        """The current fake time in seconds since the Unix epoch."""
        return self._now.timestamp()

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds`` and return the new time.

        Raises:
            ValueError: ``seconds`` is negative or not finite; use ``set`` to go back in time.
        """
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"advance() needs finite seconds >= 0, got {seconds!r}")
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, moment: datetime | float) -> None:
        """Jump to ``moment`` (an aware ``datetime`` or Unix seconds), backwards too.

        Raises:
            ValueError: ``moment`` is a naive datetime or not a finite number.
        """
        self._now = _moment(moment)

    def __repr__(self) -> str:
        return f"FakeClock({self._now.isoformat()})"


__all__ = ["DEFAULT_START", "FakeClock"]

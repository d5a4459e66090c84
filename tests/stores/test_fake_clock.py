"""FakeClock: a Clock that moves only when the test moves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from oma_actors.clock import Clock
from oma_actors.testing import FakeClock
from oma_actors.testing.clock import DEFAULT_START


def test_it_is_a_clock_that_starts_at_a_fixed_moment() -> None:
    clock = FakeClock()
    assert isinstance(clock, Clock)
    assert clock.now() == DEFAULT_START
    assert clock.now() == clock.now()  # time does not pass by itself
    assert clock.unix() == DEFAULT_START.timestamp()


def test_advance_moves_forward_and_returns_the_new_time() -> None:
    clock = FakeClock(1_000.0)
    assert clock.advance(1.5) == datetime.fromtimestamp(1_001.5, UTC)
    assert clock.unix() == 1_001.5
    clock.advance(0)
    assert clock.unix() == 1_001.5


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf")])
def test_advance_refuses_to_go_back_or_to_infinity(seconds: float) -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="advance"):
        clock.advance(seconds)
    assert clock.now() == DEFAULT_START


def test_set_jumps_anywhere_and_normalises_to_utc() -> None:
    clock = FakeClock()
    plus_two = timezone(timedelta(hours=2))
    clock.set(datetime(2030, 6, 1, 14, 0, tzinfo=plus_two))
    assert clock.now() == datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
    assert clock.now().tzinfo is UTC
    clock.set(0)
    assert clock.now() == datetime(1970, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("bad", [datetime(2025, 1, 1), float("nan"), True])
def test_naive_or_non_finite_moments_are_refused(bad: datetime | float) -> None:
    with pytest.raises(ValueError, match="FakeClock needs"):
        FakeClock(bad)
    with pytest.raises(ValueError, match="FakeClock needs"):
        FakeClock().set(bad)

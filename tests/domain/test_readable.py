"""The one timestamp form and the one way to shorten a text that a person reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from oma_actors.readable import ELLIPSIS, shorten, to_iso


def test_timestamps_are_utc_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_999, tzinfo=UTC)
    assert to_iso(moment) == "2026-01-02T03:04:05.678Z"  # truncated like toISOString
    assert to_iso(moment.replace(microsecond=0)) == "2026-01-02T03:04:05.000Z"
    # Another offset is the same instant, written in UTC.
    east = moment.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert to_iso(east) == "2026-01-02T03:04:05.678Z"


@pytest.mark.parametrize(
    ("text", "limit", "shown"),
    [
        ("short", 10, "short"),
        ("exactly10!", 10, "exactly10!"),
        ("eleven char", 10, "eleven ch…"),
        ("ab", 1, "…"),
        ("", 1, ""),
    ],
)
def test_a_cut_text_ends_with_an_ellipsis_within_its_limit(
    text: str, limit: int, shown: str
) -> None:
    assert shorten(text, limit) == shown
    assert len(shorten(text, limit)) <= limit


def test_an_error_text_can_say_how_much_was_left_out() -> None:
    text = "a" * 1000
    shown = shorten(text, 100, tell_rest=True)
    assert len(shown) <= 100
    kept = shown.index(ELLIPSIS)
    assert shown == f"{'a' * kept}… ({1000 - kept} more characters)"
    # Too tight a limit for the note: just the ellipsis.
    assert shorten(text, 10, tell_rest=True) == "a" * 9 + ELLIPSIS
    assert shorten("fits", 10, tell_rest=True) == "fits"


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="limit must be at least 1"):
        shorten("x", 0)

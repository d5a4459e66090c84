"""What a person (or OMA) reads: one timestamp form and one way to shorten a text.

Every timestamp shown in the CLI, the timeline, the sidecar's events or an approval prompt is
``to_iso``: ISO-8601 in UTC with milliseconds and ``Z``, the form of JavaScript's
``Date.toISOString`` that OMA writes (it lives in ``oma_actors.clock``; this module is where the
CLI, which keeps to the public modules, reaches it). Every text cut to fit is cut by ``shorten``,
which ends it with an ellipsis so a reader sees that something is missing.
"""

from __future__ import annotations

from oma_actors.clock import to_iso

__all__ = ["ELLIPSIS", "shorten", "to_iso"]

ELLIPSIS = "…"


def shorten(text: str, limit: int, *, tell_rest: bool = False) -> str:
    """``text`` in at most ``limit`` characters, ending with ``…`` when it was cut.

    Args:
        text: the text to fit.
        limit: the most characters the result may have (at least 1).
        tell_rest: also say how many characters were left out (``… (1234 more characters)``),
            when that fits in ``limit``; for error messages, where the size is a clue.

    Raises:
        ValueError: ``limit`` is below 1.
    """
    if limit < 1:
        raise ValueError(f"shorten: limit must be at least 1, got {limit}")
    if len(text) <= limit:
        return text
    if tell_rest:
        # The count is at most len(text): sizing the note by it keeps the result within limit.
        widest = f"{ELLIPSIS} ({len(text)} more characters)"
        kept = limit - len(widest)
        if kept > 0:
            return f"{text[:kept]}{ELLIPSIS} ({len(text) - kept} more characters)"
    return text[: limit - 1] + ELLIPSIS

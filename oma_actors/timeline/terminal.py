"""Stored text made safe to print on a person's terminal: the one escaping function.

Model text, tool output, titles and ids come from outside; printed raw, an ESC/CSI/OSC sequence
could move the cursor, recolour or rewrite lines already shown (forging a mark such as
"executed"), set the window title or a hyperlink; a NUL or a C1 control can do the same on some
terminals, and a bidi override (U+202A-202E, U+2066-2069) makes the text read in another order
than it is stored. ``terminal_safe`` replaces every such character by its visible escape
(``\\x1b``, ``\\u202e``), so the rest of a sequence prints as harmless text and a reader still
sees that something was there. It lives in ``timeline`` because that is the lowest layer both
the timeline's text renderer and the CLI may import (import-linter), and every terminal output
of the project (``oma runs show``, ``oma checkpoint show``, ``oma approvals``, the sidecar's
``GetRunTimeline`` text) goes through it.
"""

from __future__ import annotations

import re

# C0 controls (NUL..US), DEL, C1 controls (U+0080-U+009F; U+009B is a one-character CSI), the
# bidi embeddings/overrides/isolates, and the invisible bidi marks (LRM, RLM, ALM) that can
# reorder what surrounds them.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_KEEPING_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control, escape and bidi-override character shown as its escape.

    Args:
        text: Any stored text (model output, tool result, title, id, reason).
        keep_newlines: Keep ``\\n`` and ``\\t`` (for multi-line blocks such as JSON); by
            default they are escaped too, so one value stays on one line.

    Returns:
        Text with no character a terminal interprets; printable text is unchanged.
    """
    pattern = _UNSAFE_KEEPING_LINES if keep_newlines else _UNSAFE
    return pattern.sub(_visible, text)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


__all__ = ["terminal_safe"]

"""Short one-line texts of model output and tool results, for the timeline's cells."""

from __future__ import annotations

from oma_actors.readable import shorten

SUMMARY_CHARS = 160


def summarize(content: object) -> str:
    """One line of at most ``SUMMARY_CHARS`` characters of a text or a list of content blocks."""
    if isinstance(content, list):
        parts = [_block_text(block) for block in content]
        content = " ".join(part for part in parts if part)
    text = " ".join(str(content).split())
    return shorten(text, SUMMARY_CHARS)


def _block_text(block: object) -> str:
    if isinstance(block, dict):
        return str(block.get("text") or "")
    return str(getattr(block, "text", "") or "")

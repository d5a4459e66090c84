"""Reusing the JSON text of messages and tool records between saves of one run.

A conversation only grows, and every snapshot carries all of it; these helpers let ``encode``
serialize each message once and splice its text into later snapshots.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def dumps(value: object) -> str:
    """Compact JSON, non-ASCII kept, NaN and infinities refused."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class EncodeCache:
    """The JSON text of conversation messages and tool records, reused between saves of a run.

    A conversation only grows, and every save writes all of it: without this, each save would
    rebuild and re-serialize every earlier message. Entries are keyed by object identity (the
    values are frozen) and hold the object, so an id is never mistaken for a newer object's. Only
    what the latest save used is kept.
    """

    def __init__(self) -> None:
        self._texts: dict[int, tuple[object, str]] = {}

    def text(
        self, value: object, render: Callable[[Any], dict[str, Any]], used: dict[int, Any]
    ) -> str:
        """The JSON text of ``value``, rendered and serialized once."""
        key = id(value)
        hit = self._texts.get(key)
        if hit is None or hit[0] is not value:
            hit = (value, dumps(render(value)))
        used[key] = hit
        return hit[1]

    def keep(self, used: dict[int, tuple[object, str]]) -> None:
        """Forget everything the latest save did not use."""
        self._texts = used


# One random nonce per process: a user string cannot guess it, and the pattern compiles once.
_NONCE = secrets.token_hex(8)
_PLACEHOLDER = re.compile(r'"\\u0000' + _NONCE + r':(\d+)\\u0000"')


class Fragments:
    """Collects pre-encoded list texts for one ``encode`` call, behind unique placeholders."""

    def __init__(self, cache: EncodeCache) -> None:
        self._cache = cache
        self.texts: list[str] = []
        self.used: dict[int, tuple[object, str]] = {}

    def list_of(self, items: Sequence[Any], render: Callable[[Any], dict[str, Any]]) -> str:
        """A placeholder string standing for the JSON array of ``items``."""
        parts = ",".join(self._cache.text(item, render, self.used) for item in items)
        self.texts.append(f"[{parts}]")
        # NUL cannot appear raw in JSON text, and the nonce keeps user strings from matching.
        return f"\x00{_NONCE}:{len(self.texts) - 1}\x00"

    def splice(self, text: str) -> str:
        """Replace each quoted placeholder in ``text`` with its array text."""
        if not self.texts:
            return text
        return _PLACEHOLDER.sub(lambda match: self.texts[int(match.group(1))], text)

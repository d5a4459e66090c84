"""Reusing the JSON text of messages and tool records between saves of one run.

A conversation only grows, and every snapshot carries all of it; these helpers let ``encode``
serialize each message once and splice its text into later snapshots. The escaped form of each
list (as it sits inside a JSON string: the FileStore keeps each value so) is kept too, so a
save escapes only the messages that are new since the last one (#25).
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING, Any

from oma_actors.jsontext import compact_text, string_literal
from oma_actors.stores.base import JsonText

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from oma_actors.stores.redaction import Redactor


def dumps(value: object) -> str:
    """Compact JSON, non-ASCII kept, NaN and infinities refused (``json.dumps``'s text, by
    orjson where it writes the same: ``jsontext``), a lone surrogate escaped as
    ``JSON.stringify`` escapes it (``compact_text``): a snapshot's text always encodes as UTF-8,
    so a database store can hold it (a tool output may well hold one)."""
    return compact_text(value)


def escaped(text: str) -> str:
    """``text`` as it sits inside a JSON string literal (``json.dumps`` without the quotes).

    Escaping maps each character on its own, so the escape of a concatenation is the
    concatenation of the escapes: what lets escaped parts be spliced like plain ones.
    """
    return string_literal(text)[1:-1]


class _Text:
    """One encoded value and its JSON text."""

    __slots__ = ("text", "value")

    def __init__(self, value: object, text: str) -> None:
        self.value = value
        self.text = text


class EncodeCache:
    """The JSON text of conversation messages and tool records, reused between saves of a run.

    A conversation only grows, and every save writes all of it: without this, each save would
    rebuild and re-serialize every earlier message. Entries are keyed by object identity (the
    values are frozen) and hold the object, so an id is never mistaken for a newer object's. Only
    what the latest save used is kept.

    Per list (keyed by its first value), the escaped text of the list as last escaped is kept
    too: a list that only grew since is escaped from where it stopped (#25).
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        self._texts: dict[int, _Text] = {}
        self._escaped: dict[int, tuple[list[_Text], str]] = {}
        self.redactor = redactor
        """The rules of the run's ``RedactingStore`` (``redactor_of``): every text this cache
        makes is redacted as it is encoded, each message once a run."""

    def dumps(self, value: dict[str, Any] | list[Any]) -> str:
        """``dumps(value)``, under the redactor's rules when there is one (placeholders kept)."""
        if self.redactor is None:
            return dumps(value)
        return self.redactor.encode(value, is_placeholder)

    def text(
        self, value: object, render: Callable[[Any], dict[str, Any]], used: dict[int, Any]
    ) -> _Text:
        """The encoded ``value``, rendered and serialized once."""
        key = id(value)
        hit = self._texts.get(key)
        if hit is None or hit.value is not value:
            hit = _Text(value, self.dumps(render(value)))
        used[key] = hit
        return hit

    def escaped_list(self, parts: list[_Text], text: str) -> str:
        """``escaped(text)``, where ``text`` is the JSON array of ``parts``.

        When the list was escaped before and only grew since (the same parts, by identity, then
        new ones), only the new parts are escaped; otherwise the whole text is, once.
        """
        if not parts:
            return escaped(text)
        key = id(parts[0].value)
        known = self._escaped.get(key)
        if known is not None and _starts_with(parts, known[0]):
            before, done = known
            new = parts[len(before) :]
            added = ",".join(escaped(part.text) for part in new)
            result = f"{done[:-1]},{added}]" if new else done
        else:
            result = escaped(text)
        self._escaped[key] = (parts, result)
        return result

    def keep(self, used: dict[int, _Text]) -> None:
        """Forget everything the latest save did not use."""
        self._texts = used
        self._escaped = {key: hit for key, hit in self._escaped.items() if key in used}


def _starts_with(parts: list[_Text], prefix: list[_Text]) -> bool:
    if len(prefix) > len(parts) or not prefix:
        return False
    return all(a is b for a, b in zip(prefix, parts, strict=False))


# One random nonce per process: a user string cannot guess it, and the patterns compile once.
_NONCE = secrets.token_hex(8)
_PLACEHOLDER = re.compile(r'"\\u0000' + _NONCE + r':(\d+)\\u0000"')
# The same placeholder in the escaped text: each quote and backslash escaped once more.
_ESCAPED_PLACEHOLDER = re.compile(r'\\"\\\\u0000' + _NONCE + r':(\d+)\\\\u0000\\"')
_PLACEHOLDER_HEAD = f"\x00{_NONCE}:"


def is_placeholder(text: str) -> bool:
    """Whether ``text`` is a placeholder ``Fragments.list_of`` made (a user string cannot be:
    it would have to guess the process's nonce)."""
    return text.startswith(_PLACEHOLDER_HEAD) and text.endswith("\x00")


class Fragments:
    """Collects pre-encoded list texts for one ``encode`` call, behind unique placeholders."""

    def __init__(self, cache: EncodeCache) -> None:
        self.cache = cache
        self.texts: list[str] = []
        self.parts: list[list[_Text]] = []
        self.used: dict[int, _Text] = {}

    def list_of(self, items: Sequence[Any], render: Callable[[Any], dict[str, Any]]) -> str:
        """A placeholder string standing for the JSON array of ``items``."""
        parts = [self.cache.text(item, render, self.used) for item in items]
        self.parts.append(parts)
        self.texts.append("[" + ",".join(part.text for part in parts) + "]")
        # NUL cannot appear raw in JSON text, and the nonce keeps user strings from matching.
        return f"{_PLACEHOLDER_HEAD}{len(self.texts) - 1}\x00"

    def splice(self, text: str) -> str:
        """Replace each quoted placeholder in ``text`` with its array text."""
        if not self.texts:
            return text
        return _PLACEHOLDER.sub(lambda match: self.texts[int(match.group(1))], text)

    def splice_literal(self, text: str) -> str:
        """The JSON string literal of ``splice(text)``, from the lists' cached escapes."""
        literal = string_literal(text)
        if not self.texts:
            return literal

        def escaped_list(match: re.Match[str]) -> str:
            index = int(match.group(1))
            return self.cache.escaped_list(self.parts[index], self.texts[index])

        return _ESCAPED_PLACEHOLDER.sub(escaped_list, literal)


class EncodedText(JsonText):
    """A snapshot's JSON text that builds its string literal from its fragments (#25)."""

    _skeleton: str
    _fragments: Fragments | None
    _literal: str | None

    _redactor: Redactor | None

    def __new__(
        cls, text: str, skeleton: str, fragments: Fragments, redactor: Redactor | None = None
    ) -> EncodedText:
        """``text`` is ``fragments.splice(skeleton)``, encoded under ``redactor``'s rules."""
        self = super().__new__(cls, text)
        self._skeleton = skeleton
        self._fragments = fragments
        self._literal = None
        self._redactor = redactor
        return self

    def redacted_by(self) -> Redactor | None:
        """The redactor this text was encoded under (``EncodeCache.redactor``), if any."""
        return self._redactor

    def json_literal(self) -> str:
        """``json.dumps(self, ensure_ascii=False)``, escaping only the skeleton and new parts."""
        literal = self._literal
        if literal is None:
            fragments = self._fragments
            literal = (
                super().json_literal()
                if fragments is None
                else fragments.splice_literal(self._skeleton)
            )
            # Built once; the parts need not stay alive for this text any more.
            self._literal, self._fragments = literal, None
        return literal

"""Secret redaction as pure functions: the rules a ``RedactingStore`` applies on write (spec RD).

``redact`` walks a JSON object/array structure-aware (RD-05, RD-06) and otherwise redacts free
text with the ordered rules of RD-07. Every built-in pattern follows the JavaScript semantics of
OMA's ``utils/redaction.ts``: ``\\b`` and case folding are ASCII-only (``re.ASCII``), and
whitespace is JavaScript's ``\\s`` set, spelled out.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import TYPE_CHECKING, Any

from oma_actors.domain.secret_names import is_sensitive_name
from oma_actors.errors import ConfigurationError
from oma_actors.jsontext import reject_constant
from oma_actors.stores.keyring import is_envelope

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

REDACTED = "[redacted]"
"""The replacement token every rule writes."""

# JavaScript's \s: TAB LF VT FF CR SPACE, NBSP, the other Zs spaces, LS, PS and ZWNBSP.
_WS_CHARS = r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_WS = f"[{_WS_CHARS}]"

# RD-07 rules 1-3: PEM private-key blocks, then Authorization header values, then Bearer tokens.
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")
_AUTHORIZATION_HEADER = re.compile(
    rf"\b(Authorization{_WS}*:{_WS}*)(?:Bearer{_WS}+)?[^\n\r,;}}]+", re.IGNORECASE | re.ASCII
)
_BEARER_TOKEN = re.compile(r"\bBearer" + _WS + r"+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE | re.ASCII)

# RD-07 rules 4-5: an optionally quoted name, `:` or `=`, then a quoted or an unquoted value.
# The name is the first `[A-Za-z_]` of a run of name characters up to the run's end: a start
# further inside the run ends where the first one ends and meets the same separator, so the
# search may only begin where a run begins (the lookbehind) and steps over the run's leading
# `[0-9.-]` (group 2, written back as it was). Read as "any start, the longest name" the rule
# matches the same text, but a backtracking engine retries every start of a run against every
# length of its name: 45 ms for one 1 KiB word, minutes for 100 KiB. Each quantifier below is
# possessive where what follows cannot be what it gave back; the search stays linear.
_NAME_AND_SEPARATOR = (
    rf"(?:([\"'])|(?<![A-Za-z0-9_.-])([0-9.-]*+))"
    rf"([A-Za-z_][A-Za-z0-9_.-]*+)((?:\1)?{_WS}*+[:=]{_WS}*+)"
)
_QUOTED_ASSIGNMENT = re.compile(_NAME_AND_SEPARATOR + r"([\"'])(.*?)\5", re.DOTALL | re.ASCII)
_UNQUOTED_ASSIGNMENT = re.compile(
    _NAME_AND_SEPARATOR + rf"([^\"'{_WS_CHARS},;}}\]\n\r][^,;}}\]\n\r]*+)", re.ASCII
)

# RD-07 rule 6: provider token literals by prefix (sk-, gh*_, github_pat_, AKIA, xox*-).
_TOKEN_LITERALS = tuple(
    re.compile(source, re.ASCII)
    for source in (
        r"\bsk-[A-Za-z0-9_-]{16,}\b",
        r"\bgh[pousr]_[A-Za-z0-9_]{20,}\b",
        r"\bgithub_pat_[A-Za-z0-9_]{20,}\b",
        r"\bAKIA[0-9A-Z]{16}\b",
        r"\bxox[baprs]-[A-Za-z0-9-]{10,}\b",
    )
)

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def compile_patterns(patterns: Sequence[str | re.Pattern[str]]) -> tuple[re.Pattern[str], ...]:
    """Validate and compile caller patterns for ``redact``.

    Args:
        patterns: Regular expressions as strings (compiled with no flags) or compiled ``str``
            patterns (used as they are).

    Returns:
        The compiled patterns, in order.

    Raises:
        ConfigurationError: ``patterns`` is a single string or pattern instead of a sequence, a
            string does not compile, or an entry is neither a string nor a ``str`` pattern.
    """
    if isinstance(patterns, str | bytes | re.Pattern):
        raise ConfigurationError(
            f"redaction patterns must be a sequence of patterns, got {patterns!r}"
        )
    compiled: list[re.Pattern[str]] = []
    for pattern in patterns:
        if isinstance(pattern, str):
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                raise ConfigurationError(f"invalid redaction pattern {pattern!r}: {exc}") from exc
        elif isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
            compiled.append(pattern)
        else:
            raise ConfigurationError(
                f"redaction pattern {pattern!r} is neither a string nor a compiled str pattern"
            )
    return tuple(compiled)


def redact_text(text: str, patterns: Sequence[str | re.Pattern[str]] = ()) -> str:
    """Redact secrets from free text with the rules of RD-07, in order.

    1. PEM private-key blocks.
    2. ``Authorization:`` header values (the ``Authorization:`` prefix is kept).
    3. ``Bearer`` tokens of at least 8 characters.
    4. Quoted assignments to a sensitive name (the quotes are kept).
    5. Unquoted assignments to a sensitive name, up to ``,;}]`` or a line end.
    6. Token literals: ``sk-``, ``gh[pousr]_``, ``github_pat_``, ``AKIA``, ``xox[baprs]-``.
    7. Every match of every caller pattern.

    Args:
        text: The text to scrub.
        patterns: Extra patterns (e.g. PII); each match becomes ``[redacted]``.

    Returns:
        The text with each secret replaced by ``[redacted]``.

    Raises:
        ConfigurationError: A pattern is invalid (see ``compile_patterns``).
    """
    return _redact_text(text, compile_patterns(patterns))


def redact(value: str, patterns: Sequence[str | re.Pattern[str]] = ()) -> str:
    """Redact a stored value: structure-aware for a JSON object/array, free text otherwise.

    When ``value.lstrip()`` starts with ``{`` or ``[`` and the whole value parses as a JSON
    object or array, each member whose key is sensitive becomes ``"[redacted]"`` whatever its
    type, string leaves are redacted as free text, and the result is compact JSON (RD-05, RD-06).
    Anything else, JSON scalars such as ``"42"`` included, is redacted as free text (RD-07).

    Args:
        value: The value about to be stored.
        patterns: Extra patterns applied after the built-in rules.

    Returns:
        The redacted value.

    Raises:
        ConfigurationError: A pattern is invalid (see ``compile_patterns``).
    """
    return redact_compiled(value, compile_patterns(patterns))


def redact_compiled(
    value: str,
    patterns: Sequence[re.Pattern[str]],
    redact_string: Callable[[str], str] | None = None,
) -> str:
    """``redact`` with patterns already checked by ``compile_patterns``.

    ``redact_string`` replaces the free-text rules for every string (a ``Redactor`` passes its
    memo); it must give what ``redact_text`` with ``patterns`` gives.
    """
    text = redact_string or (lambda leaf: _redact_text(leaf, patterns))
    if value.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(value, parse_constant=reject_constant, parse_float=_parse_float)
            if isinstance(parsed, dict | list):
                walked = _walk(parsed, text)
                encoded = json.dumps(walked, separators=(",", ":"), ensure_ascii=False)
                return _LONE_SURROGATE.sub(_escape_surrogate, encoded)
        except (ValueError, RecursionError):
            # Not JSON as JavaScript reads it, or nested too deep to walk: treat it as text.
            pass
    return text(value)


class Redactor:
    """The rules with their patterns compiled, remembering the strings it has redacted.

    A store wrapped for redaction is handed the whole snapshot at every boundary of a run, and
    a snapshot repeats every earlier message: redacting each string once and looking it up
    afterwards makes a save cost its parse and its encode, not a scan of the whole
    conversation (9.6x a bare FileStore per turn before, ``bench/redaction.py``). What it
    remembers is bounded (``max_chars``); past that it starts over.

    Args:
        patterns: Extra patterns, as ``compile_patterns`` takes them.
        max_chars: How many characters of strings, redacted and not, it keeps at most.

    Raises:
        ConfigurationError: A pattern is invalid.
    """

    def __init__(
        self, patterns: Sequence[str | re.Pattern[str]] = (), *, max_chars: int = 32 << 20
    ) -> None:
        self._patterns = compile_patterns(patterns)
        self._max_chars = max_chars
        self._seen: dict[str, str] = {}
        self._held = 0

    @property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        """The extra patterns, compiled (the built-in rules are always applied too)."""
        return tuple(self._patterns)

    def text(self, text: str) -> str:
        """``redact_text(text, patterns)``, looked up when this string was redacted before."""
        known = self._seen.get(text)
        if known is not None:
            return known
        redacted = _redact_text(text, self._patterns)
        if len(text) >= _WORTH_KEEPING:
            size = len(text) + len(redacted)
            if self._held + size > self._max_chars:
                self._seen.clear()
                self._held = 0
            self._seen[text] = redacted
            self._held += size
        return redacted

    def value(self, value: str) -> str:
        """``redact(value, patterns)``: structure-aware for a JSON object or array.

        A value that is one whole sealed envelope is written as it is (``is_envelope``): the
        sealing layer above redacted its plaintext before sealing it, if it was asked to.
        """
        if is_envelope(value):
            return value
        return redact_compiled(value, self._patterns, self.text)

    def encode(self, node: dict[str, Any] | list[Any], keep: Callable[[str], bool]) -> str:
        """The JSON text ``value`` would make of ``node``'s text, made from ``node`` directly.

        For a producer that encodes its own values (the checkpoint codec): it redacts before it
        encodes instead of the store parsing its text again. Strings ``keep`` accepts are left
        as they are (the producer's own placeholders, spliced afterwards, and redacted when
        they were encoded). NaN and infinities are refused (``ValueError``).
        """

        def text(leaf: str) -> str:
            return leaf if keep(leaf) else self.text(leaf)

        encoded = json.dumps(
            _walk(node, text), separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return _LONE_SURROGATE.sub(_escape_surrogate, encoded)


# Below this length a string is redacted faster than it is remembered.
_WORTH_KEEPING = 4


def redact_object(value: Mapping[str, Any]) -> dict[str, Any]:
    """A redacted copy of a JSON object already in memory, walked as ``redact`` walks one.

    Members under a sensitive key become ``"[redacted]"``; string leaves are redacted as free
    text; numbers, booleans and null stay. Task metadata is masked with it (spec T-95).
    """
    redacted: dict[str, Any] = redact_tree(dict(value), ())
    return redacted


def redact_tree(node: Any, patterns: Sequence[re.Pattern[str]]) -> Any:
    """A redacted copy of a parsed JSON value: the one walker of the stores and the journal.

    Members under a sensitive key become ``"[redacted]"`` whatever their type; string leaves
    are redacted as free text with ``patterns`` (already checked by ``compile_patterns``);
    numbers, booleans and null come back as they are, so a caller that encodes numbers its own
    way (the journal writes JavaScript's layout) keeps them.
    """
    return _walk(node, lambda leaf: _redact_text(leaf, patterns))


# A run's snapshots and events repeat a few dozen keys thousands of times.
_sensitive_key = functools.lru_cache(maxsize=4096)(is_sensitive_name)


def _walk(node: Any, text: Callable[[str], str]) -> Any:
    if isinstance(node, str):
        return text(node)
    if isinstance(node, list):
        return [_walk(item, text) for item in node]
    if isinstance(node, dict):
        return {
            key: REDACTED if _sensitive_key(key) else _walk(item, text)
            for key, item in node.items()
        }
    return node


def _redact_text(text: str, patterns: Sequence[re.Pattern[str]]) -> str:
    if not text:
        return text
    text = _redact_private_keys(text)
    text = _AUTHORIZATION_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BEARER_TOKEN.sub("Bearer " + REDACTED, text)
    text = _QUOTED_ASSIGNMENT.sub(_quoted_assignment, text)
    text = _UNQUOTED_ASSIGNMENT.sub(_unquoted_assignment, text)
    for literal in _TOKEN_LITERALS:
        text = literal.sub(REDACTED, text)
    for pattern in patterns:
        text = pattern.sub(lambda _: REDACTED, text)
    return text


def _redact_private_keys(text: str) -> str:
    """Each PEM private-key block, from its BEGIN line to the first END line after it.

    A BEGIN line with no END after it ends the search: no later BEGIN can find one either, so
    a text of many unclosed BEGIN lines costs one pass, not one pass per line.
    """
    parts: list[str] = []
    at = 0
    while (begin := _PEM_BEGIN.search(text, at)) is not None:
        end = _PEM_END.search(text, begin.end())
        if end is None:
            break
        parts += (text[at : begin.start()], REDACTED)
        at = end.end()
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)


def _quoted_assignment(match: re.Match[str]) -> str:
    key_quote, lead, name, separator, value_quote = match.group(1, 2, 3, 4, 5)
    if not is_sensitive_name(name):
        return match.group(0)
    return f"{key_quote or lead}{name}{separator}{value_quote}{REDACTED}{value_quote}"


def _unquoted_assignment(match: re.Match[str]) -> str:
    key_quote, lead, name, separator, value = match.group(1, 2, 3, 4, 5)
    # A value an earlier rule already masked (`Authorization: [redacted]`) is captured as
    # `[redacted` because `]` ends the value; rewriting it would leave an orphan `]`.
    if not is_sensitive_name(name) or value.startswith("[redacted"):
        return match.group(0)
    return f"{key_quote or lead}{name}{separator}{REDACTED}"


def _parse_float(literal: str) -> float | None:
    number = float(literal)
    # JSON.parse reads 1e400 as Infinity, which JSON.stringify writes as null.
    return None if math.isinf(number) else number


def _escape_surrogate(match: re.Match[str]) -> str:
    # A parsed "\ud800" escape must not come back as a raw lone surrogate that UTF-8 cannot
    # encode; JSON.stringify writes it escaped, so do the same.
    return f"\\u{ord(match.group()):04x}"


__all__ = [
    "REDACTED",
    "Redactor",
    "compile_patterns",
    "is_sensitive_name",
    "redact",
    "redact_object",
    "redact_text",
    "redact_tree",
]

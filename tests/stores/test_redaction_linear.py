"""The free-text rules of RD-07 in linear time, matching exactly what the backtracking rules matched.

The assignment rules (4, 5) were written as "an optionally quoted name, a separator, a value":
read by a backtracking engine, every start inside a long word was retried against every length
of its name, so one 1 KiB word cost 45 ms and a 100 KiB one minutes (a tool output is enough to
stall every save of a run on a ``RedactingStore`` or a redacting journal). The PEM rule (1) did
the same with many unclosed ``BEGIN`` lines. ``REFERENCE`` below is those rules as they were:
the differential test holds the new ones to the same output on generated text, and the guards
feed inputs the old rules could not finish within the test's timeout.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oma_actors.domain.secret_names import is_sensitive_name
from oma_actors.stores.redaction import REDACTED, Redactor, redact, redact_text

_WS_CHARS = r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_WS = f"[{_WS_CHARS}]"
_NAME = rf"([\"']?)([A-Za-z_][A-Za-z0-9_.-]*)(\1?{_WS}*[:=]{_WS}*)"
_OLD_PEM = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL
)
_OLD_QUOTED = re.compile(_NAME + r"([\"'])(.*?)\4", re.DOTALL | re.ASCII)
_OLD_UNQUOTED = re.compile(_NAME + rf"([^\"'{_WS_CHARS},;}}\]\n\r][^,;}}\]\n\r]*)", re.ASCII)


def _old_quoted(match: re.Match[str]) -> str:
    quote, name, separator, value_quote = match.group(1, 2, 3, 4)
    if not is_sensitive_name(name):
        return match.group(0)
    return f"{quote}{name}{separator}{value_quote}{REDACTED}{value_quote}"


def _old_unquoted(match: re.Match[str]) -> str:
    quote, name, separator, value = match.group(1, 2, 3, 4)
    if not is_sensitive_name(name) or value.startswith("[redacted"):
        return match.group(0)
    return f"{quote}{name}{separator}{REDACTED}"


def reference(text: str) -> str:
    """Rules 1, 4 and 5 as the backtracking patterns applied them (rules 2, 3, 6 are unchanged
    and left out of both sides by feeding text they do not touch: see ``TOKENS``)."""
    text = _OLD_PEM.sub(REDACTED, text)
    text = _OLD_QUOTED.sub(_old_quoted, text)
    return _OLD_UNQUOTED.sub(_old_unquoted, text)


TOKENS = [
    "password", "apiKey", "api_key", "token", "secret", "name", "user1", "x", "a9", "9", "1.5",
    "-", ".", "_", '"', "'", ":", "=", " ", "\t", "\u00a0", "\u2028", ",", ";", "}", "]", "[",
    "\n", "\r", "[redacted]", "pass.word", "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----", "é", "{",
]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join))
def test_the_linear_rules_match_what_the_backtracking_rules_matched(text: str) -> None:
    assert redact_text(text) == reference(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab9._-'\":= ,;]}\n\t"), max_size=60))
def test_the_linear_rules_agree_on_dense_punctuation(text: str) -> None:
    assert redact_text(text) == reference(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9password=hunter2", "9password=[redacted]"),
        ("1.2-api_key: 'abc'", "1.2-api_key: '[redacted]'"),
        ("x.password=1", "x.password=[redacted]"),
        ("user.name=1", "user.name=1"),
        ('"token" : "abc"', '"token" : "[redacted]"'),
        ("'9token': 'abc'", "'9token': 'abc'"),
    ],
    ids=[
        "digit-lead",
        "dotted-lead",
        "name-continues",
        "not-sensitive",
        "quoted-name",
        "quote-then-digit",
    ],
)
def test_a_name_after_leading_digits_and_dots_is_found_as_before(text: str, expected: str) -> None:
    assert redact_text(text) == reference(text) == expected


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "text",
    [
        "x" * 200_000,
        "a9" * 100_000,
        "password" * 25_000,
        "-----BEGIN PRIVATE KEY-----\n" * 10_000,
        "token  " * 30_000,
    ],
    ids=["one-word", "letters-and-digits", "names-no-separator", "unclosed-pem", "spaced-names"],
)
def test_a_long_text_does_not_stall_redaction(text: str) -> None:
    # The backtracking rules took minutes for each of these (quadratic in the text's length),
    # far past the timeout; the linear ones take milliseconds. Output equals the input: there
    # is no assignment or closed key block in them.
    assert redact_text(text) == text
    assert redact('{"output": "' + text.replace("\n", "\\n") + '"}') != ""


def test_a_redactor_remembers_within_its_bound_and_redacts_as_redact_does() -> None:
    values = [
        json.dumps({"messages": [f"password=p{i} " + "x" * 80, "sk-abcdefghijklmnopqrs"]})
        for i in range(50)
    ]
    redactor = Redactor([r"p\d+"], max_chars=2_000)
    for _ in range(2):  # the second pass is served from what it remembers, where it still can
        for value in values:
            assert redactor.value(value) == redact(value, [r"p\d+"])
    assert 0 < redactor._held <= 2_000  # bounded: it started over instead of growing

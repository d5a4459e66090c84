"""The redaction rules a RedactingStore applies, as pure functions (spec RD-05..RD-08)."""

from __future__ import annotations

import json

import pytest

from oma_actors.stores.redaction import REDACTED, is_sensitive_name, redact, redact_text

# --- RD-05 / RD-06: structure-aware redaction ------------------------------------------------


def test_nested_json_sensitive_keys() -> None:
    value = json.dumps(
        {
            "usage": {"input_tokens": 12, "output_tokens": 3},
            "config": {"apiKey": {"nested": "x"}, "password": 12345, "name": "svc"},
            "items": [{"secret": None, "ok": True}, "use Bearer abcdefghijk now", 1.5],
        }
    )
    assert redact(value) == (
        '{"usage":{"input_tokens":12,"output_tokens":3},'
        '"config":{"apiKey":"[redacted]","password":"[redacted]","name":"svc"},'
        '"items":[{"secret":"[redacted]","ok":true},"use Bearer [redacted] now",1.5]}'
    )


def test_json_reserialized_compactly_without_ascii_escapes() -> None:
    assert redact('  \n{"msg": "héllo ✓",  "n": [1, 2]}') == '{"msg":"héllo ✓","n":[1,2]}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("42", "42"),
        ('"password=abc123"', '"password=[redacted]'),
        ("true", "true"),
        ("{not json password=x}", "{not json password=[redacted]}"),
        ("[NaN]", "[NaN]"),
        ('[1, "sk-abcdefghijklmnop"', '[1, "[redacted]"'),
    ],
    ids=["number", "json-string", "bool", "invalid-object", "nan", "truncated-array"],
)
def test_non_container_values_take_free_text_path(value: str, expected: str) -> None:
    assert redact(value) == expected


def test_json_array_root_and_infinity_overflow() -> None:
    assert redact('["password=x", 1e400]') == '["password=[redacted]",null]'


def test_escaped_lone_surrogate_stays_escaped() -> None:
    out = redact('["\\ud800", {"k": "v"}]')
    assert out == '["\\ud800",{"k":"v"}]'
    out.encode("utf-8")  # storable


def test_too_deep_json_falls_back_to_free_text() -> None:
    deep = "[" * 100_000 + '"password=x"' + "]" * 100_000
    out = redact(deep)
    assert "password=x" not in out
    assert out.startswith("[" * 1000)


def test_redact_is_idempotent() -> None:
    samples = [
        "Authorization: Bearer abcdefghijk",
        'password="a b" and token=xyz; Bearer abcdefghij',
        '{"apiKey":"k","text":"secret=1"}',
        "-----BEGIN PRIVATE KEY-----\nAAA\n-----END PRIVATE KEY-----",
    ]
    for sample in samples:
        once = redact(sample)
        assert redact(once) == once


# --- RD-07: each free-text rule --------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # 1. PEM private keys, multi-line and lazy
        (
            "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAq\nZmFrZWtleQ==\n"
            "-----END RSA PRIVATE KEY-----\nafter",
            "before\n[redacted]\nafter",
        ),
        (
            "-----BEGIN PRIVATE KEY-----\nA\n-----END PRIVATE KEY----- keep "
            "-----BEGIN OPENSSH PRIVATE KEY-----\nB\n-----END OPENSSH PRIVATE KEY-----",
            "[redacted] keep [redacted]",
        ),
        (
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        ),
        # 2. Authorization header values, prefix preserved
        ("Authorization: Bearer abcdefghijk", "Authorization: [redacted]"),
        ("Authorization: Basic dXNlcjpwYXNz, next", "Authorization: [redacted], next"),
        ("x authorization:bearer abc;y", "x authorization:[redacted];y"),
        ("AUTHORIZATION :  token-abc}\nnext", "AUTHORIZATION :  [redacted]}\nnext"),
        # 3. Bearer tokens of at least 8 characters
        ("call with Bearer abcdefgh.ijk end", "call with Bearer [redacted] end"),
        ("bearer   ABCDEFGH+/=~", "Bearer [redacted]"),
        ("Bearer short", "Bearer short"),
        # 4. quoted assignments, quotes kept
        ('password="my pass" name="bob"', 'password="[redacted]" name="bob"'),
        ("'secret': 'x y'", "'secret': '[redacted]'"),
        ('{"apiKey": "abc", "keep": "v"', '{"apiKey": "[redacted]", "keep": "v"'),
        ("client_secret='a\"b'", "client_secret='[redacted]'"),
        # 5. unquoted assignments up to , ; } ] or newline
        ("password=my pass, user=bob", "password=[redacted], user=bob"),
        ("session: abc123; x", "session: [redacted]; x"),
        ("sessionId=abc]rest", "sessionId=[redacted]]rest"),
        ("github_token=abc\nnext line", "github_token=[redacted]\nnext line"),
        ("input_tokens=42, max_tokens=7", "input_tokens=42, max_tokens=7"),
        ("token: [redacted]", "token: [redacted]"),
        # 6. token literals, word-bounded
        ("key sk-abcdefghijklmnop.", "key [redacted]."),
        ("sk-short1234", "sk-short1234"),
        ("xsk-abcdefghijklmnopq", "xsk-abcdefghijklmnopq"),
        ("ghp_" + "a" * 36, "[redacted]"),
        ("gho_" + "B" * 20 + " ghs_" + "c" * 20, "[redacted] [redacted]"),
        ("ghp_" + "a" * 19, "ghp_" + "a" * 19),
        ("github_pat_" + "c" * 22, "[redacted]"),
        ("id AKIAIOSFODNN7EXAMPLE.", "id [redacted]."),
        ("AKIAIOSFODNN7EXAMPLEX", "AKIAIOSFODNN7EXAMPLEX"),
        ("xoxb-1234567890-abc", "[redacted]"),
        ("xoxp-123", "xoxp-123"),
    ],
)
def test_free_text_rule(before: str, after: str) -> None:
    assert redact(before) == after


def test_free_text_caller_patterns_replace_every_match() -> None:
    text = "mail a@b.io and c@d.io, key sk-abcdefghijklmnop"
    assert (
        redact_text(text, [r"[a-z]+@[a-z]+\.io"])
        == "mail [redacted] and [redacted], key [redacted]"
    )


def test_caller_patterns_run_last() -> None:
    # The built-in rules have already replaced the token when the caller pattern runs.
    assert redact("sk-abcdefghijklmnop", [r"sk-\w+"]) == "[redacted]"
    assert redact("password=x", [r"\[redacted\]"]) == "password=[redacted]"


def test_empty_value() -> None:
    assert redact("") == ""
    assert REDACTED == "[redacted]"


# --- RD-08: sensitive names ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "apiKey",
        "api_key",
        "API-KEY",
        "x-api-key",
        "secret",
        "clientSecret",
        "password",
        "passwd",
        "pwd",
        "privateKey",
        "private_key",
        "accessKey",
        "access-key",
        "accessToken",
        "refreshToken",
        "idToken",
        "githubToken",
        "Authorization",
        "auth_token",
        "authToken",
        "cookie",
        "Set-Cookie",
        "session",
        "sessionId",
        "credentials",
        "bearer",
        "token",
        "TOKEN",
        "github_token",
        "x-token",
        "token_type",
        "token-id",
    ],
)
def test_sensitive_names(name: str) -> None:
    assert is_sensitive_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "input_tokens",
        "output_tokens",
        "max_tokens",
        "tokens",
        "tokenizer",
        "name",
        "keep",
        "result",
        "author",
        "monkey",
        "token\n",
        "",
    ],
)
def test_not_sensitive_names(name: str) -> None:
    assert not is_sensitive_name(name)

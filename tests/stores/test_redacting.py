"""RedactingStore and the redaction rules (spec RD-01..RD-08, tests T-70..T-80)."""

from __future__ import annotations

import builtins
import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors.errors import ConfigurationError
from oma_actors.stores.base import (
    AtomicStore,
    ExpiringStore,
    MemoryEntry,
    MemoryStore,
    is_atomic_store,
    is_memory_store,
)
from oma_actors.stores.file import FileStore
from oma_actors.stores.memory import InMemoryStore
from oma_actors.stores.redacting import ExpiringRedactingStore, RedactingStore
from oma_actors.stores.redaction import (
    REDACTED,
    compile_patterns,
    is_sensitive_name,
    redact,
    redact_text,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


class MinimalStore:
    """The five required methods only (no expiry, no CAS), recording every call."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.calls: builtins.list[tuple[Any, ...]] = []

    async def get(self, key: str) -> MemoryEntry | None:
        self.calls.append(("get", key))
        return await self.inner.get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        self.calls.append(("set", key, value, metadata))
        await self.inner.set(key, value, metadata)

    async def list(self) -> builtins.list[MemoryEntry]:
        self.calls.append(("list",))
        return await self.inner.list()

    async def delete(self, key: str) -> None:
        self.calls.append(("delete", key))
        await self.inner.delete(key)

    async def clear(self) -> None:
        self.calls.append(("clear",))
        await self.inner.clear()


async def value_of(store: MemoryStore, key: str) -> str:
    entry = await store.get(key)
    assert entry is not None
    return entry.value


# --- spec 18.7 -------------------------------------------------------------------------------


def test_t70_compare_and_set_is_absent() -> None:
    store = RedactingStore(InMemoryStore())
    assert not hasattr(store, "compare_and_set")
    assert not is_atomic_store(store)
    assert not isinstance(store, AtomicStore)
    assert is_memory_store(store)
    assert isinstance(store, MemoryStore)
    assert not hasattr(RedactingStore(MinimalStore()), "compare_and_set")


async def test_t71_password_assignment_redacted_in_get_and_inner() -> None:
    inner = InMemoryStore()
    store = RedactingStore(inner)
    await store.set("k", "password=hunter2")
    assert await value_of(store, "k") == "password=[redacted]"
    assert await value_of(inner, "k") == "password=[redacted]"


async def test_t72_sk_token_in_free_text() -> None:
    inner = InMemoryStore()
    await RedactingStore(inner).set("k", "the key is sk-abcdefghijklmnop done")
    value = await value_of(inner, "k")
    assert "sk-abcdefghijklmnop" not in value
    assert value == "the key is [redacted] done"


async def test_t73_list_shows_redacted_value() -> None:
    store = RedactingStore(InMemoryStore())
    await store.set("k", "apiKey=abc123")
    assert [(e.key, e.value) for e in await store.list()] == [("k", "apiKey=[redacted]")]


async def test_t74_json_value_redacted_structure_aware() -> None:
    inner = InMemoryStore()
    raw = json.dumps(
        {
            "token": "sk-abcdefghijklmnopqrstu",
            "result": "my key is sk-zzzzzzzzzzzzzzzzzzzz",
            "keep": "plain value",
        }
    )
    await RedactingStore(inner).set("k", raw)
    stored = await value_of(inner, "k")
    parsed = json.loads(stored)
    assert parsed["token"] == "[redacted]"
    assert "sk-zzzzzzzzzzzzzzzzzzzz" not in parsed["result"]
    assert "[redacted]" in parsed["result"]
    assert parsed["keep"] == "plain value"
    assert "sk-" not in stored


async def test_t75_json_scalar_stays() -> None:
    inner = InMemoryStore()
    await RedactingStore(inner).set("k", "42")
    assert await value_of(inner, "k") == "42"


@pytest.mark.parametrize(
    "pattern", [r"\d{3}-\d{2}-\d{4}", re.compile(r"\d{3}-\d{2}-\d{4}")], ids=["str", "compiled"]
)
async def test_t76_custom_pattern_plus_builtins(pattern: str | re.Pattern[str]) -> None:
    inner = InMemoryStore()
    store = RedactingStore(inner, patterns=[pattern])
    await store.set("k", "ssn 123-45-6789, again 987-65-4321, key sk-abcdefghijklmnop")
    value = await value_of(inner, "k")
    assert "123-45-6789" not in value
    assert "987-65-4321" not in value
    assert "sk-abcdefghijklmnop" not in value
    assert value == "ssn [redacted], again [redacted], key [redacted]"


async def test_t77_set_with_expiry_forwarded_when_inner_has_it() -> None:
    inner = InMemoryStore()
    store = RedactingStore(inner)
    assert hasattr(store, "set_with_expiry")
    assert isinstance(store, ExpiringStore)
    assert isinstance(store, ExpiringRedactingStore)
    assert isinstance(store, RedactingStore)
    await store.set_with_expiry("k", "secret=topsecret", 5, {"agent": "a"})
    entry = await inner.get("k")
    assert entry is not None
    assert entry.value == "secret=[redacted]"
    assert entry.expires_at_turn == 5
    assert entry.metadata == {"agent": "a"}


def test_t78_set_with_expiry_absent_when_inner_lacks_it() -> None:
    store = RedactingStore(MinimalStore())
    assert not hasattr(store, "set_with_expiry")
    assert not isinstance(store, ExpiringStore)
    assert type(store) is RedactingStore


async def test_t79_metadata_forwarded_unchanged() -> None:
    inner = MinimalStore()
    metadata = {"agent": "researcher", "kind": "password=shown-in-metadata"}
    await RedactingStore(inner).set("password=key-is-not-redacted", "password=hunter2", metadata)
    assert inner.calls == [("set", "password=key-is-not-redacted", "password=[redacted]", metadata)]
    assert inner.calls[0][3] is metadata
    entry = await inner.inner.get("password=key-is-not-redacted")
    assert entry is not None
    assert entry.metadata == {"agent": "researcher", "kind": "password=shown-in-metadata"}


async def test_t80_delete_and_clear_forwarded() -> None:
    inner = MinimalStore()
    store = RedactingStore(inner)
    await store.set("a", "1")
    await store.set("b", "2")
    await store.set("c", "3")
    await store.delete("a")
    assert [e.key for e in await inner.inner.list()] == ["b", "c"]
    await store.clear()
    assert await inner.inner.list() == []
    assert [call for call in inner.calls if call[0] in ("delete", "clear")] == [
        ("delete", "a"),
        ("clear",),
    ]


# --- pass-through and construction -----------------------------------------------------------


async def test_get_and_list_return_inner_results() -> None:
    inner = MinimalStore()
    store = RedactingStore(inner)
    await inner.inner.set("raw", "password=written-around-the-wrapper")
    entry = await store.get("raw")
    assert entry is await inner.inner.get("raw")
    assert await store.get("missing") is None
    assert await store.list() == await inner.inner.list()
    assert ("get", "raw") in inner.calls
    assert ("list",) in inner.calls


def test_file_store_inner_keeps_expiry_and_no_cas(tmp_path: Path) -> None:
    store = RedactingStore(FileStore(tmp_path / "state.json"))
    assert callable(getattr(store, "set_with_expiry", None))
    assert not hasattr(store, "compare_and_set")


def test_expiring_class_refuses_store_without_expiry() -> None:
    with pytest.raises(ConfigurationError, match="set_with_expiry"):
        ExpiringRedactingStore(MinimalStore())


def test_inner_must_be_a_store() -> None:
    with pytest.raises(ConfigurationError, match="get/set/list/delete/clear"):
        RedactingStore(object())  # type: ignore[call-overload]


def test_invalid_string_pattern_is_named() -> None:
    with pytest.raises(ConfigurationError, match=re.escape("'(unclosed'")):
        RedactingStore(InMemoryStore(), patterns=["(unclosed"])


@pytest.mark.parametrize("bad", [42, None, re.compile(b"bytes")], ids=["int", "none", "bytes"])
def test_non_pattern_entries_rejected(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="neither a string nor"):
        compile_patterns([bad])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        RedactingStore(InMemoryStore(), patterns=[bad])  # type: ignore[list-item]


@pytest.mark.parametrize("bad", ["abc", re.compile("abc")], ids=["str", "compiled"])
def test_single_pattern_instead_of_sequence_rejected(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="sequence"):
        compile_patterns(bad)


def test_redact_validates_patterns() -> None:
    with pytest.raises(ConfigurationError, match=re.escape("'[z-a]'")):
        redact("x", ["[z-a]"])


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


# --- RD-09: the raw backend never holds the secret -------------------------------------------

ANTHROPIC_KEY = (
    "sk-ant-api03-Zq3vN8xLk2Pw9Rt5Yb7Hc4Jm6Df1Gs0Ea-Uo_Ii8Kl2Mn4Op6Qr8St0Uv2Wx4Yz6AbCdEfAA"
)
OPENAI_KEY = "sk-proj-Tq9Wv3Xz7Ab1Cd5Ef9Gh3Ij7Kl1Mn5Op9Qr3St7Uv1Wx5Yz9"
GITHUB_TOKEN = "ghp_R4nd0mL00k1ngG1tHubT0k3nV4lu3Xy7Zq9W"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
SLACK_TOKEN = "xoxb-123456789012-1234567890123-Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7"
BEARER_JWT = (
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
PEM_BODY = ("MIIEowIBAAKCAQEA7bq98r4Zt2xS", "Qm9ndXNLZXlGb3JUZXN0aW5nT25seQ", "Zm9vYmFyYmF6cXV4")
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"
PASSWORD = "hunter2secret"
SECRETS = (ANTHROPIC_KEY, OPENAI_KEY, GITHUB_TOKEN, AWS_KEY, SLACK_TOKEN, BEARER_JWT, PASSWORD)


async def test_raw_file_bytes_hold_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    values = {
        "anthropic": f"the key is {ANTHROPIC_KEY} ok",
        "openai": f"OPENAI={OPENAI_KEY}",
        "github": f"push with {GITHUB_TOKEN}",
        "aws": f"aws id {AWS_KEY}",
        "slack": f"slack {SLACK_TOKEN}",
        "header": f"GET /\nAuthorization: Bearer {BEARER_JWT}\nHost: x",
        "bearer": f"curl -H 'X: Bearer {BEARER_JWT}'",
        "pem": f"here is the key:\n{PEM}\ndone",
        "password": f"password={PASSWORD}",
        "all": "\n".join(
            [
                ANTHROPIC_KEY,
                OPENAI_KEY,
                GITHUB_TOKEN,
                AWS_KEY,
                SLACK_TOKEN,
                f"Authorization: Bearer {BEARER_JWT}",
                PEM,
                f"password={PASSWORD}",
            ]
        ),
        "json": json.dumps(
            {
                "result": f"my key is {ANTHROPIC_KEY}",
                "config": {"apiKey": OPENAI_KEY, "pem": PEM, "password": PASSWORD},
                "usage": {"input_tokens": 10},
                "log": [f"Authorization: Bearer {BEARER_JWT}", GITHUB_TOKEN, AWS_KEY, SLACK_TOKEN],
            }
        ),
    }
    async with FileStore.open(path) as inner:
        store = RedactingStore(inner)
        for key, value in values.items():
            await store.set(key, value, {"agent": "worker"})
        await store.set_with_expiry("expiring", f"token is {GITHUB_TOKEN}", 3)

    raw = path.read_bytes()
    for secret in (*SECRETS, *PEM_BODY, "BEGIN RSA PRIVATE KEY"):
        assert secret.encode() not in raw, secret
    assert b"sk-" not in raw
    assert json.loads(raw)["version"] == 1

    reopened = FileStore(path)
    entries = {entry.key: entry for entry in await reopened.list()}
    assert set(entries) == {*values, "expiring"}
    for entry in entries.values():
        assert "[redacted]" in entry.value, entry.key
    assert entries["password"].value == "password=[redacted]"
    assert entries["pem"].value == "here is the key:\n[redacted]\ndone"
    assert entries["header"].value == "GET /\nAuthorization: [redacted]\nHost: x"
    assert entries["expiring"].expires_at_turn == 3
    assert entries["aws"].metadata == {"agent": "worker"}
    structured = json.loads(entries["json"].value)
    assert structured["config"] == {
        "apiKey": "[redacted]",
        "pem": "[redacted]",
        "password": "[redacted]",
    }
    assert structured["usage"] == {"input_tokens": 10}
    assert structured["log"] == [
        "Authorization: [redacted]",
        "[redacted]",
        "[redacted]",
        "[redacted]",
    ]
    await reopened.aclose()

"""RedactingStore: a store that writes redacted values (spec RD-01..RD-04, RD-09, T-70..T-80).

The rules themselves (what is redacted) are in test_redaction_rules.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from oma_actors.errors import ConfigurationError
from oma_actors.stores.base import (
    AtomicStore,
    ExpiringStore,
    MemoryStore,
    is_atomic_store,
    is_memory_store,
)
from oma_actors.stores.file import FileStore
from oma_actors.stores.memory import InMemoryStore
from oma_actors.stores.redacting import ExpiringRedactingStore, RedactingStore
from oma_actors.stores.redaction import compile_patterns, redact
from oma_actors.testing import MinimalStore, StoreCall


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
    assert inner.calls == [
        StoreCall("set", "password=key-is-not-redacted", "password=[redacted]", metadata)
    ]
    assert inner.calls[0].metadata is metadata
    entry = await inner.get("password=key-is-not-redacted")
    assert entry is not None
    assert entry.metadata == {"agent": "researcher", "kind": "password=shown-in-metadata"}


async def test_t80_delete_and_clear_forwarded() -> None:
    inner = MinimalStore()
    store = RedactingStore(inner)
    await store.set("a", "1")
    await store.set("b", "2")
    await store.set("c", "3")
    await store.delete("a")
    assert [e.key for e in await inner.list()] == ["b", "c"]
    await store.clear()
    assert await inner.list() == []
    assert [call for call in inner.calls if call.op in ("delete", "clear")] == [
        StoreCall("delete", "a"),
        StoreCall("clear"),
    ]


# --- pass-through and construction -----------------------------------------------------------


async def test_get_and_list_return_inner_results() -> None:
    inner = MinimalStore()
    await inner.set("raw", "password=written-around-the-wrapper")
    stored, listed = await inner.get("raw"), await inner.list()
    inner.calls.clear()
    store = RedactingStore(inner)
    assert await store.get("raw") is stored  # as written, not redacted on read
    assert await store.get("missing") is None
    assert await store.list() == listed
    assert inner.calls == [StoreCall("get", "raw"), StoreCall("get", "missing"), StoreCall("list")]


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

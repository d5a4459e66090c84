"""A redacting store under an encrypting one (``EncryptingStore(RedactingStore(inner))``): the
redactor leaves a whole sealed envelope alone (``keyring.is_envelope``), and nothing else.

Its rules ran over the envelope's base64 before: a rule as broad as ``[A-Za-z0-9+/]{20,}``
turned every value into ``oma-sealed:v1:k1:[redacted]``, and one as plain as ``\\d{4}`` broke
about one value in twenty, silently at write time; either way the value never opened again.
"""

from __future__ import annotations

import pytest

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.checkpoint import checkpoint_key
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import InMemoryStore, RedactingStore
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import PREFIX, KeyRing, is_envelope
from oma_actors.stores.redacting import redactor_of
from oma_actors.stores.redaction import Redactor
from oma_actors.testing import ScriptedAdapter

RING = KeyRing({"k1": bytes(range(32))}, active="k1")


@pytest.mark.parametrize("pattern", [r"[A-Za-z0-9+/]{20,}", r"\d{4}", r"[A-Z]{3}"])
async def test_sealed_values_written_through_a_redacting_store_open_again(pattern: str) -> None:
    inner = InMemoryStore()
    store = EncryptingStore(RedactingStore(inner, patterns=[pattern]), RING)
    values = {f"note/{i}": f"meeting {i} moved to room {i % 7}" for i in range(200)}
    for key, value in values.items():
        await store.set(key, value)
    assert {key: (await store.get(key) or pytest.fail(key)).value for key in values} == values
    assert all(is_envelope(entry.value) for entry in await inner.list())


async def test_a_value_that_only_looks_sealed_is_still_redacted() -> None:
    """Only a whole envelope is skipped: the prefix with plaintext after it is redacted."""
    inner = InMemoryStore()
    store = RedactingStore(inner, patterns=[r"\d{4}"])
    for value in (f"{PREFIX}k1:card 4111 1111", f"{PREFIX}k1:AAAA1234==tail"):
        await store.set("v", value)
        stored = (await inner.get("v") or pytest.fail("v")).value
        assert "[redacted]" in stored
        assert "4111" not in stored
        assert "1234" not in stored


def test_an_envelope_is_the_prefix_a_key_id_and_base64_alone() -> None:
    sealed = RING.seal(b"x", b"context")
    assert is_envelope(sealed)
    for text in (sealed + " ", " " + sealed, sealed + "\n", f"{PREFIX}k1:", f"{PREFIX}:AAAA"):
        assert not is_envelope(text)
    assert not is_envelope(f"{PREFIX}k1:pass=word")
    assert not is_envelope(f"{PREFIX}{'k' * 65}:AAAA")


async def test_the_redacting_store_s_rules_redact_the_plaintext_before_it_is_sealed() -> None:
    """With the redacting store under the encrypting one, its rules still apply: to the
    plaintext, before the seal (``EncryptingStore.seal``), as a redacting journal's rules
    apply under an ``EncryptingJournal``. Nothing of the secret reaches the disk, sealed or not."""
    inner = InMemoryStore()
    store = EncryptingStore(RedactingStore(inner, patterns=[r"patient-\d+"]), RING)
    await store.set("note", "seen patient-123 today")
    await store.set("doc", '{"who": "patient-456", "api_key": "sk-live-abcdef"}')
    assert (await store.get("note") or pytest.fail("note")).value == "seen [redacted] today"
    doc = (await store.get("doc") or pytest.fail("doc")).value
    assert "patient-456" not in doc
    assert "sk-live-abcdef" not in doc
    assert all(is_envelope(entry.value) for entry in await inner.list())


async def test_a_checkpoint_is_redacted_as_it_is_encoded_not_parsed_again() -> None:
    """``redactor_of`` sees the redacting store's rules through the encrypting one: the
    checkpoint codec redacts while it encodes, and the seal does not parse and redact the whole
    snapshot text again at every save (``Redactor.value`` sees no checkpoint)."""
    inner = InMemoryStore()
    store = EncryptingStore(RedactingStore(inner, patterns=[r"patient-\d+"]), RING)
    assert redactor_of(store) is store.redactor is not None
    redacted_texts: list[str] = []
    real = Redactor.value

    def watched(self: Redactor, value: str) -> str:
        redacted_texts.append(value)
        return real(self, value)

    worker = ScriptedAdapter([LLMResponse([TextBlock("seen patient-123")], usage=TokenUsage(1, 1))])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Redactor, "value", watched)
        result = await OpenMultiAgent().run_tasks(
            Team("t", [AgentConfig("w", adapter=worker)]),
            [Task("note", "write it down")],
            checkpoint=CheckpointOptions(store=store, run_id="run-redacted"),
        )
    assert result.success
    assert not [text for text in redacted_texts if '"inFlightTasks"' in text]
    saved = await store.get(checkpoint_key("run-redacted"))
    assert saved is not None
    assert "patient-123" not in saved.value
    assert "[redacted]" in saved.value

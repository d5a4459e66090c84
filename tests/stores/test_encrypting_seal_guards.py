"""The keyring's and EncryptingStore's guards that no other test held: AES-256 keys only, a
fresh nonce per seal, a truncated envelope that fails closed as corrupt, and a key proof that
neither a malformed envelope nor a value of an older key can satisfy.
"""

from __future__ import annotations

import base64

import pytest

from oma_actors.errors import ConfigurationError, CorruptStoreError
from oma_actors.stores import InMemoryStore
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import NONCE_BYTES, PREFIX, KeyMismatchError, KeyRing
from oma_actors.stores.prefix import UnreadableEntry

SECRET = "card-5500-0000-0000-0004"
RIGHT = bytes(range(32))
WRONG = bytes(range(100, 132))
OTHER = bytes(range(50, 82))


def ring(key: bytes = RIGHT, key_id: str = "k1", **older: bytes) -> KeyRing:
    return KeyRing({key_id: key, **older}, active=key_id)


async def raw(store: InMemoryStore) -> dict[str, str]:
    return {entry.key: entry.value for entry in await store.list()}


@pytest.mark.parametrize("size", [16, 24])
def test_a_key_of_another_aes_size_is_refused(size: int) -> None:
    """Holds the ring's ``len(key) != KEY_BYTES`` check: AES-GCM would take a 16- or 24-byte
    key as AES-128 or AES-192 without a word, and the ring promises AES-256."""
    with pytest.raises(ConfigurationError, match=f"must be 32 bytes, got {size}"):
        KeyRing({"k1": bytes(size)}, active="k1")


async def test_every_seal_takes_a_fresh_nonce() -> None:
    """Holds the random nonce of ``KeyRing.seal``: the same value written twice at the same
    entry is sealed under two nonces (a repeated GCM nonce leaks the XOR of the plaintexts
    and the authentication key)."""
    inner = InMemoryStore()
    store = EncryptingStore(inner, ring())
    nonces = set()
    for _ in range(3):
        await store.set("worker/note", SECRET)
        envelope = (await raw(inner))["worker/note"]
        nonces.add(base64.b64decode(envelope.rsplit(":", 1)[1])[:NONCE_BYTES])
    assert len(nonces) == 3


@pytest.mark.parametrize("body", ["AAAA", "A" * 32], ids=["shorter-than-a-nonce", "no-tag"])
async def test_a_truncated_envelope_fails_closed_as_corrupt(body: str) -> None:
    """Holds ``KeyRing.open``'s length check: an envelope too short to hold a nonce and a tag
    is a ``CorruptStoreError`` naming the entry (not a bare ``ValueError`` from the cipher), so
    ``list_each`` reports it as unreadable instead of failing the whole listing."""
    inner = InMemoryStore()
    store = EncryptingStore(inner, ring())
    await store.set("worker/good", "fine")
    await inner.set("worker/cut", f"{PREFIX}k1:{body}")
    with pytest.raises(CorruptStoreError, match=r"'worker/cut'.*too short"):
        await store.get("worker/cut")
    listed = await store.list_each("worker/")
    unreadable = [entry for entry in listed if isinstance(entry, UnreadableEntry)]
    assert [entry.key for entry in unreadable] == ["worker/cut"]
    assert "too short" in unreadable[0].error


async def test_a_malformed_envelope_under_the_active_id_proves_nothing() -> None:
    """Holds ``proves_active``'s ``continue`` on a malformed envelope: a value under the active
    id that is no envelope at all (bad base64) is no witness either way, so a wrong key with
    that id is still refused by the values that do not open for it."""
    inner = InMemoryStore()
    await EncryptingStore(inner, ring()).set("__oma_run__/r1", SECRET)
    await inner.set("worker/note", f"{PREFIX}k1:not base64!")
    before = await raw(inner)
    wrong = EncryptingStore(inner, ring(WRONG))
    with pytest.raises(KeyMismatchError):
        await wrong.set("worker/note", "overwritten")
    assert await raw(inner) == before


async def test_a_value_of_an_older_key_opened_proves_nothing_of_the_active_key() -> None:
    """Holds ``EncryptingStore.open``'s ``sealed_by_active`` condition: a value that opened
    under a rotated-out key says nothing of the active key, so a wrong key with the active id
    is still refused after reading it."""
    inner = InMemoryStore()
    await EncryptingStore(inner, ring()).set("worker/old", "sealed under k1")
    rotated = ring(OTHER, "k2", k1=RIGHT)
    await EncryptingStore(inner, rotated).set("worker/mid", SECRET)
    before = await raw(inner)
    wrong = EncryptingStore(inner, ring(WRONG, "k2", k1=RIGHT))
    old = await wrong.get("worker/old")
    assert old is not None
    assert old.value == "sealed under k1"
    with pytest.raises(KeyMismatchError):
        await wrong.set("worker/new", "written under the wrong k2")
    assert await raw(inner) == before
    await EncryptingStore(inner, rotated).set("worker/new", "the rightful k2 writes")

"""``KeyRing``: the AES-256-GCM keys of encryption at rest, and the sealed envelope they make.

A sealed value is one ASCII string, ``oma-sealed:v1:<key id>:<base64(nonce | ciphertext+tag)>``:
the version lets a later format coexist with this one, and the key id says which key of the
ring opens it, so values sealed before a rotation stay readable while their key is in the ring.
Every seal takes associated data (``context``) that the caller derives from where the value
lives (a store's entry key, a journal event's run id and seq): the tag then fails if the value is
moved anywhere else. The envelope's version and key id are authenticated too.

An envelope names its key only by id, so a ring whose key has an id the storage already uses
must first show that it is the same key: ``proves_active`` opens values already sealed under
that id (the encrypting wrappers do so once before their first write), and a key that opens none
of them raises ``KeyMismatchError`` before anything is sealed into that storage. No check value
is stored: the values themselves are the proof, so the format is unchanged.

``cryptography`` is imported on first use, so only users of encryption need the ``crypto`` extra.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import stat
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.errors import SEALED_PREFIX, ConfigurationError, KeyMismatchError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = SEALED_PREFIX
"""What every sealed value starts with; anything else is plaintext to an encrypted reader."""

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # 96 bits, GCM's native nonce: random per seal
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class UnsealError(ValueError):
    """A value could not be opened; ``reason`` says why, ``key_id`` names the key it claimed.

    Internal to the encrypting wrappers, which turn it into a ``CorruptStoreError`` naming the
    entry (or the journal event) it came from.
    """

    def __init__(self, reason: str, key_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key_id = key_id


@dataclass(frozen=True, slots=True)
class KeyProof:
    """What stored envelopes say of a ring's active key (``KeyRing.proves_active``).

    Attributes:
        opens: ``True``: one sealed under the active id opens, so the key is the one that
            sealed it; ``False``: some are sealed under that id and none opens (another key
            with the same id); ``None``: none is, so nothing stored can disagree.
        failed: The index of the first witness under the active id that did not open, if any.
    """

    opens: bool | None
    failed: int | None


def _crypto() -> tuple[type[AESGCM], type[Exception]]:
    try:
        # The optional dependency is loaded only when a ring is made.
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:
        raise ConfigurationError(
            "encryption at rest needs cryptography: pip install 'oma-actors[crypto]'"
        ) from exc
    return AESGCM, InvalidTag


class KeyRing:
    """The keys that may open sealed values, and the one that seals new ones.

    Args:
        keys: Key id -> 32-byte AES-256 key. Ids are 1-64 characters of ``A-Z a-z 0-9 . _ -``.
        active: The id that seals every new value; must be in ``keys``.

    Raises:
        ConfigurationError: No keys, a malformed id, a key that is not 32 bytes, an ``active``
            id missing from ``keys``, or the ``cryptography`` package is not installed.
    """

    __slots__ = ("_active", "_active_prefix", "_ciphers", "_invalid_tag", "_proven")

    def __init__(self, keys: Mapping[str, bytes], *, active: str) -> None:
        if not keys:
            raise ConfigurationError("a KeyRing needs at least one key")
        for key_id, key in keys.items():
            if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
                raise ConfigurationError(
                    f"key id {key_id!r} must be 1-64 characters of A-Z a-z 0-9 . _ -"
                )
            if not isinstance(key, bytes) or len(key) != KEY_BYTES:
                size = len(key) if isinstance(key, bytes) else type(key).__name__
                raise ConfigurationError(f"key {key_id!r} must be {KEY_BYTES} bytes, got {size}")
        if active not in keys:
            raise ConfigurationError(f"the active key id {active!r} is not in the ring")
        aesgcm, invalid_tag = _crypto()
        self._active = active
        self._active_prefix = PREFIX + active + ":"
        self._ciphers = {key_id: aesgcm(key) for key_id, key in keys.items()}
        self._invalid_tag = invalid_tag
        # The stores and journals (the inner objects) the active key was proven for: wrappers
        # made anew over one of them (the sidecar seals its shared database journal once per
        # attempt) then skip the proof's reads. Weak, so a closed one is forgotten.
        self._proven: weakref.WeakSet[object] = weakref.WeakSet()

    @property
    def active(self) -> str:
        """The id of the key that seals new values."""
        return self._active

    @property
    def ids(self) -> tuple[str, ...]:
        """Every key id in the ring, the active one included, in the order given."""
        return tuple(self._ciphers)

    def __repr__(self) -> str:
        # Never the key bytes: a ring ends up in logs and tracebacks.
        return f"KeyRing(ids={list(self._ciphers)!r}, active={self._active!r})"

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> KeyRing:
        """Read a key file: one ``id:base64key`` a line, the first line's key is the active one.

        Blank lines and lines starting with ``#`` are skipped. The file holds secrets, so one
        that its group or other users may read (or write) is refused, as the sidecar's token is.

        Raises:
            ConfigurationError: The file is missing, readable by others, empty, or has a line
                that is not ``id:base64key``, bad base64, a key that is not 32 bytes, or an id
                given twice. The message names the file and the line.
        """
        name = os.fspath(path)
        try:
            mode = os.stat(name).st_mode
            with open(name, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"key file {name}: cannot read it ({exc})") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigurationError(
                f"key file {name} is accessible by other users (mode {stat.filemode(mode)}); "
                f"chmod 600 it"
            )
        keys: dict[str, bytes] = {}
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            key_id, colon, encoded = text.partition(":")
            where = f"key file {name} line {number}"
            if not colon or not _KEY_ID.fullmatch(key_id):
                raise ConfigurationError(
                    f"{where}: expected 'id:base64key' with an id of A-Za-z0-9._-"
                )
            if key_id in keys:
                raise ConfigurationError(f"{where}: key id {key_id!r} is given twice")
            try:
                key = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise ConfigurationError(f"{where}: key {key_id!r} is not valid base64") from None
            if len(key) != KEY_BYTES:
                raise ConfigurationError(
                    f"{where}: key {key_id!r} is {len(key)} bytes, AES-256 needs {KEY_BYTES}"
                )
            keys[key_id] = key
        if not keys:
            raise ConfigurationError(f"key file {name} holds no key")
        return cls(keys, active=next(iter(keys)))

    def seal(self, plaintext: bytes, context: bytes) -> str:
        """Encrypt ``plaintext`` under the active key, bound to ``context``; the envelope string."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self._active].encrypt(nonce, plaintext, _aad(self._active, context))
        return PREFIX + self._active + ":" + base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, envelope: str, context: bytes) -> bytes:
        """Decrypt an envelope made by ``seal`` with the same ``context``.

        Raises:
            UnsealError: ``envelope`` is not sealed (plaintext), names a key id not in the ring,
                is malformed, or fails authentication (tampered, or sealed for another context).
        """
        if not envelope.startswith(PREFIX):
            raise UnsealError("the value is not sealed (plaintext in an encrypted store)")
        key_id, colon, encoded = envelope[len(PREFIX) :].partition(":")
        if not colon:
            raise UnsealError("the sealed value has no key id")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnsealError(f"sealed under key id {key_id!r}, which is not in the ring", key_id)
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise UnsealError(f"sealed under key {key_id!r}: not valid base64", key_id) from None
        if len(raw) < NONCE_BYTES + 16:
            raise UnsealError(f"sealed under key {key_id!r}: too short", key_id)
        try:
            plaintext = cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _aad(key_id, context))
        except self._invalid_tag:
            raise UnsealError(
                f"sealed under key {key_id!r}: authentication failed (tampered, moved from "
                f"another entry, or a different key with this id)",
                key_id,
            ) from None
        return plaintext

    def sealed_by_active(self, envelope: str) -> bool:
        """Whether ``envelope`` names the active key id (a prefix test: nothing is opened)."""
        return envelope.startswith(self._active_prefix)

    def proves_active(self, witnesses: Iterable[tuple[str, bytes]]) -> KeyProof:
        """What stored envelopes (with their contexts, read lazily up to the first that opens)
        tell of whether the active key is THE key of its id (see ``KeyProof``)."""
        failed: int | None = None
        cipher = self._ciphers[self._active]
        for index, (envelope, context) in enumerate(witnesses):
            if not envelope.startswith(self._active_prefix):
                continue
            raw = _raw(envelope[len(self._active_prefix) :])
            if raw is None:  # malformed: no witness either way
                continue
            try:
                cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _aad(self._active, context))
            except self._invalid_tag:
                # A tampered value fails here too, so only one that opens decides.
                failed = index if failed is None else failed
                continue
            return KeyProof(True, failed)
        return KeyProof(None if failed is None else False, failed)

    def proven_for(self, storage: object) -> bool:
        """Whether ``note_proven(storage)`` was called while ``storage`` lives."""
        try:
            return storage in self._proven
        except TypeError:  # not weakly referable: never noted
            return False

    def note_proven(self, storage: object) -> None:
        """Remember that the active key is the key of its id for ``storage`` (a store or a
        journal that wrappers seal into), so that the next wrapper over it need not read it."""
        # A storage that cannot be weakly referenced is proven again by each wrapper.
        with contextlib.suppress(TypeError):
            self._proven.add(storage)

    def key_id_of(self, envelope: str) -> str | None:
        """The key id an envelope names, or ``None`` when it is not an envelope."""
        if not envelope.startswith(PREFIX):
            return None
        key_id, colon, _ = envelope[len(PREFIX) :].partition(":")
        return key_id if colon else None


_ENVELOPE = re.compile(re.escape(PREFIX) + _KEY_ID.pattern + r":[A-Za-z0-9+/]+={0,2}")


def is_envelope(text: str) -> bool:
    """Whether ``text`` is one whole sealed envelope (prefix, key id, base64) and nothing else:
    ciphertext, with no plaintext for a redaction rule to find.

    A redacting layer under a sealing one (``EncryptingStore(RedactingStore(...))``, a sealed
    journal writing into a redacting one) leaves such a value alone: a rule as broad as
    ``[A-Za-z0-9+/]{20,}``, or one as plain as ``\\d{4}``, matches inside the base64, and the
    value never opens again. A prefix alone is not enough (``oma-sealed:v1:k:password=x`` is
    plaintext).
    """
    return _ENVELOPE.fullmatch(text) is not None


def _raw(encoded: str) -> bytes | None:
    """The nonce and ciphertext an envelope's last field holds, ``None`` when malformed."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) >= NONCE_BYTES + 16 else None


def _aad(key_id: str, context: bytes) -> bytes:
    # The version and key id are authenticated with the caller's context, so relabeling an
    # envelope's key id or version is caught even between keys that happen to be equal.
    return PREFIX.encode("ascii") + key_id.encode("ascii") + b"\x00" + context


__all__ = [
    "KEY_BYTES",
    "PREFIX",
    "KeyMismatchError",
    "KeyProof",
    "KeyRing",
    "UnsealError",
    "is_envelope",
]

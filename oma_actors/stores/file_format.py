"""OMA's FileStore file format as pure functions: bytes in, entries out, and back (FS-02, FS-04).

The format is ``{"version":1,"entries":[{"key","value","metadata"?,"createdAt","expiresAtTurn"?}]}``
as compact JSON, byte-compatible with what the TypeScript OMA writes with ``JSON.stringify``.
A corrupt file raises and is never read as empty (FS-04). No I/O happens here, so every
corrupt-file case is testable without a disk.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from oma_actors.clock import from_iso, to_iso
from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.jsontext import compact_dumps, loads, reject_constant
from oma_actors.stores.base import JsonText, MemoryEntry

if TYPE_CHECKING:
    from collections.abc import Iterable

STATE_FILE_VERSION = 1

# JS's JSON.stringify escapes a lone surrogate as \udxxx; Python would keep it raw and then fail
# to encode UTF-8 on write, so one odd value would make every later flush of the store fail.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_store(entries: Iterable[MemoryEntry]) -> bytes:
    """Serialize entries, in the given order, to the on-disk bytes of a state file.

    Args:
        entries: The entries to write, in insertion order.

    Returns:
        Compact UTF-8 JSON, ``{"version":1,"entries":[...]}``.

    Raises:
        StoreError: An entry's metadata is not JSON-serializable.
    """
    # The document is joined from its entries' texts, byte for byte what one ``json.dumps`` of
    # it writes: so a ``JsonText`` value brings its literal and is not escaped again (#25).
    pieces = [f'{{"version":{STATE_FILE_VERSION},"entries":[']
    for index, entry in enumerate(entries):
        if index:
            pieces.append(",")
        _entry_pieces(entry, pieces)
    pieces.append("]}")
    text = "".join(pieces)  # one copy of what may be megabytes, not one per level
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Only a lone surrogate fails strict UTF-8; escape it the way JSON.stringify does. The
        # common case pays for no extra pass over what may be megabytes of text.
        return _escape_lone_surrogates(text).encode("utf-8")


def check_encodable(entry: MemoryEntry) -> None:
    """Raise ``StoreError`` if ``entry`` could not be written.

    A store calls this before it changes its in-memory mirror: an unencodable entry in the mirror
    would make every later flush of the whole file fail. Key and value are strings, which always
    encode, so only the metadata needs the check.
    """
    if entry.metadata is not None:
        _dumps(entry.metadata, f"metadata of entry {entry.key!r}")


def decode_store(path: str, data: bytes) -> dict[str, MemoryEntry]:
    """Parse a state file into entries keyed by ``key``, in file order.

    Args:
        path: The file's path, used only in error messages.
        data: The file's bytes.

    Returns:
        The entries; a later duplicate key replaces the value but keeps the first position,
        as OMA's ``Map`` does.

    Raises:
        CorruptStoreError: The bytes are not a version-1 state file. The reason names the defect
            with OMA's phrases (``not valid JSON``, ``not a store object``, ...).
    """
    try:
        # orjson where its value is json's: 10x on a big file.
        parsed = loads(data, parse_constant=reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptStoreError(
            path, f"state file is not valid JSON ({exc}); refusing to start a fresh store"
        ) from exc
    if not isinstance(parsed, dict):
        raise CorruptStoreError(path, "state file is not a store object")
    version = parsed.get("version")
    # bool is an int in Python but not a number in JS, so `true` must not pass as version 1.
    if type(version) not in (int, float) or version != STATE_FILE_VERSION:
        shown = json.dumps(version) if "version" in parsed else "(missing)"
        raise CorruptStoreError(
            path,
            f"unsupported state file version {shown}; refusing to load it "
            f"(expected {STATE_FILE_VERSION})",
        )
    raw_entries = parsed.get("entries")
    if not isinstance(raw_entries, list):
        raise CorruptStoreError(path, 'state file has no "entries" array')
    entries: dict[str, MemoryEntry] = {}
    for index, raw in enumerate(raw_entries):
        entry = _decode_entry(path, index, raw)
        entries[entry.key] = entry
    return entries


def _decode_entry(path: str, index: int, raw: object) -> MemoryEntry:
    if not isinstance(raw, dict) or not all(
        isinstance(raw.get(field), str) for field in ("key", "value", "createdAt")
    ):
        raise CorruptStoreError(
            path, f"malformed entry at index {index} (needs string key, value and createdAt)"
        )
    key: str = raw["key"]
    try:
        created_at = from_iso(raw["createdAt"])
    except ValueError as exc:
        raise CorruptStoreError(
            path, f"invalid createdAt {raw['createdAt']!r} in entry {key!r}"
        ) from exc
    metadata = raw.get("metadata")
    if "metadata" in raw and not isinstance(metadata, dict):
        raise CorruptStoreError(path, f"non-object metadata in entry {key!r}")
    return MemoryEntry(
        key=key,
        value=raw["value"],
        metadata=metadata,
        created_at=created_at,
        expires_at_turn=_turn(raw.get("expiresAtTurn")),
    )


def _turn(raw: object) -> int | None:
    # OMA drops a non-number expiresAtTurn ("no expiry"). A non-integral number is dropped too:
    # turns are integers and MemoryEntry says int; keeping 7.5 would leak a float to callers.
    if type(raw) is int:
        return raw
    if type(raw) is float and raw.is_integer():
        return int(raw)
    return None


def _entry_pieces(entry: MemoryEntry, pieces: list[str]) -> None:
    """Append one entry's JSON object text (``_entry_object``, compact) to ``pieces``."""
    value = entry.value
    if not isinstance(value, JsonText):
        pieces.append(_dumps(_entry_object(entry), "state file"))
        return
    obj = _entry_object(entry)
    del obj["key"], obj["value"]  # the rest keeps its order; createdAt is always there
    key = _dumps(entry.key, "state file")
    rest = _dumps(obj, "state file")
    pieces += ['{"key":', key, ',"value":', value.json_literal(), ",", rest[1:]]


def _entry_object(entry: MemoryEntry) -> dict[str, Any]:
    # Key order and omitted optionals match OMA's writer, so files diff cleanly against its output.
    obj: dict[str, Any] = {"key": entry.key, "value": entry.value}
    if entry.metadata is not None:
        obj["metadata"] = entry.metadata
    obj["createdAt"] = to_iso(entry.created_at)
    if entry.expires_at_turn is not None:
        obj["expiresAtTurn"] = entry.expires_at_turn
    return obj


def _dumps(document: object, what: str) -> str:
    try:
        text = compact_dumps(document)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON-serializable: {exc}") from exc
    return text


def _escape_lone_surrogates(text: str) -> str:
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)

"""The size quota of client input: one request may carry at most so many bytes.

Everything a client sends can end up stored: a ``StartRun``'s spec in the run record and the
checkpoint, a host tool's result and an approval's edited arguments in the checkpoint and the
journal. A file store holds all runs in one file that it refuses to read past its limit, so
unbounded input once made a sidecar unbootable (issue 24, item 1). Every ``oma.v1`` request is
checked as it is decoded (``sidecar.decoding``), before any handler stores anything; a request
over the quota ends with RESOURCE_EXHAUSTED, reason ``INPUT_TOO_LARGE``, naming its largest
field so the client knows what to shorten.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import grpc

from sidecar.status import SidecarError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from google.protobuf.descriptor import FieldDescriptor
    from google.protobuf.message import Message


class InputTooLargeError(SidecarError):
    """A request is larger than the server's input quota.

    ``request`` is the refused message, decoded (``None`` if unknown): a handler may need to
    know what it refused, e.g. which host tool call an oversized result was for.
    """

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(
        self, field: str, size: int, limit: int, *, request: Message | None = None
    ) -> None:
        super().__init__(
            "INPUT_TOO_LARGE",
            f"the request is {size} bytes, over this server's {limit}-byte input quota "
            f"(--max-input-bytes); its largest field is {field}",
            metadata={"field": field, "size": str(size), "limit": str(limit)},
        )
        self.field = field
        self.size = size
        self.limit = limit
        self.request = request


def check_input_size(message: Message, size: int, limit: int) -> None:
    """Refuse ``message`` (``size`` bytes on the wire) if it is over ``limit`` bytes.

    Raises:
        InputTooLargeError: naming the request's largest field.
    """
    if size > limit:
        raise InputTooLargeError(largest_field(message) or "request", size, limit, request=message)


def largest_field(message: Message) -> str:
    """The path of the largest part of ``message``, for a client to know what to shorten.

    Fields are named as declared, joined by dots; an item of a repeated field by its index
    (``tasks.tasks[3].description``) and an entry of a map by its key, JSON-quoted and cut to
    ``KEY_CHARS`` characters (``metadata.fields["note"].string_value``: a ``Struct``'s member,
    whose ``Value`` may nest further ``Struct``s and ``ListValue``s). At each level the field
    with the most bytes (all its items or entries together) is chosen; the path goes on into
    its largest item or entry only while that one holds at least half of them, so a field
    made large by many small items (a ``depends_on`` of thousands of ids) is named itself.
    """
    path: list[str] = []
    current: Message | None = message
    while current is not None:
        best_size, best_name, best_child = -1, "", None
        for descriptor, value in current.ListFields():
            parts = list(_parts(descriptor, value))
            size = sum(part[1] for part in parts)
            if size <= best_size:
                continue
            name, largest, child = max(parts, key=lambda part: part[1])
            if descriptor.is_repeated and 2 * largest < size:  # many items make it large
                name, child = descriptor.name, None
            best_size, best_name, best_child = size, name, child
        if not best_name:
            break
        path.append(best_name)
        current = best_child
    return ".".join(path)


KEY_CHARS = 40
"""A map key longer than this is cut in a field path (the path travels in the error)."""


def _parts(descriptor: FieldDescriptor, value: Any) -> Iterator[tuple[str, int, Message | None]]:
    """The parts of a set field: each one's name in a path, its size in bytes and the message
    the path may go on into (``None``: a leaf)."""
    entry = descriptor.message_type
    if entry is not None and entry.GetOptions().map_entry:  # a map: entries by key
        key_field, value_field = entry.fields_by_name["key"], entry.fields_by_name["value"]
        for key, item in value.items():
            key_size, item_size = _size(key_field, key), _size(value_field, item)
            # A huge key is what to shorten, not the value it maps to.
            message_valued = value_field.message_type is not None
            child = item if message_valued and item_size >= key_size else None
            yield f"{descriptor.name}[{_key(key)}]", key_size + item_size, child
        return
    if not descriptor.is_repeated:
        yield descriptor.name, _size(descriptor, value), value if entry is not None else None
        return
    for index, item in enumerate(value):
        child = item if entry is not None else None
        yield f"{descriptor.name}[{index}]", _size(descriptor, item), child


def _key(key: object) -> str:
    """A map key in a path: a string JSON-quoted (ASCII, cut to ``KEY_CHARS``), else as is."""
    if isinstance(key, str):
        return json.dumps(key[:KEY_CHARS]) + ("..." if len(key) > KEY_CHARS else "")
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _size(descriptor: FieldDescriptor, value: object) -> int:
    if descriptor.message_type is not None:
        return int(value.ByteSize())  # type: ignore[attr-defined]
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes):
        return len(value)
    return 8  # a number or a bool: never what makes a request too large

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

from typing import TYPE_CHECKING

import grpc
from google.protobuf.descriptor import FieldDescriptor

from sidecar.status import SidecarError

if TYPE_CHECKING:
    from google.protobuf.message import Message


class InputTooLargeError(SidecarError):
    """A request is larger than the server's input quota."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, field: str, size: int, limit: int) -> None:
        super().__init__(
            "INPUT_TOO_LARGE",
            f"the request is {size} bytes, over this server's {limit}-byte input quota "
            f"(--max-input-bytes); its largest field is {field}",
            metadata={"field": field, "size": str(size), "limit": str(limit)},
        )
        self.field = field


def check_input_size(message: Message, size: int, limit: int) -> None:
    """Refuse ``message`` (``size`` bytes on the wire) if it is over ``limit`` bytes.

    Raises:
        InputTooLargeError: naming the request's largest field.
    """
    if size > limit:
        raise InputTooLargeError(largest_field(message) or "request", size, limit)


def largest_field(message: Message) -> str:
    """The dotted path (``tasks.tasks[3].description``) of the largest leaf in ``message``."""
    path: list[str] = []
    current: Message | None = message
    while current is not None:
        best_size, best_name, best_child = -1, "", None
        for descriptor, value in current.ListFields():
            repeated = descriptor.is_repeated
            items = list(enumerate(value)) if repeated else [(None, value)]
            for index, item in items:
                size = _size(descriptor, item)
                if size > best_size:
                    name = descriptor.name if index is None else f"{descriptor.name}[{index}]"
                    child = item if descriptor.type == FieldDescriptor.TYPE_MESSAGE else None
                    best_size, best_name, best_child = size, name, child
        if not best_name:
            break
        path.append(best_name)
        current = best_child
    return ".".join(path)


def _size(descriptor: FieldDescriptor, value: object) -> int:
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        return int(value.ByteSize())  # type: ignore[attr-defined]
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes):
        return len(value)
    return 8  # a number or a bool: never what makes a request too large

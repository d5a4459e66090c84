"""Fuzz every RPC with arbitrary request messages: a documented code, never a crash.

Messages are generated from the proto descriptors (every field, nested messages, oneofs, unknown
enum values, hostile strings). The server runs on its own event loop in a thread so hypothesis
can drive a synchronous client.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sidecar_helpers import ECHO, TOKEN

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar._pb.oma.v1 import sidecar_pb2_grpc as pb_grpc
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from collections.abc import Iterator

    from google.protobuf.descriptor import Descriptor

ALLOWED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,  # a valid watch that simply keeps streaming
}
WORDS = st.sampled_from(
    ["", " ", "a", "run-1", "t1", "worker", "scripted", "echo", "lookup", "memory://",
     "file:///tmp/x.json", "file://rel", "mysql://h", '{"type": "object"}', "{", "[]", "\x00",
     "é" * 3, "a" * 300, "run/../x", "apr_" + "0" * 32, "0" * 64]
)  # fmt: skip
SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_STRING: st.one_of(WORDS, st.text(max_size=12)),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=True),
    FieldDescriptor.TYPE_ENUM: st.integers(-3, 12),
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=8),
}


def message_of(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Any]:
    """Arbitrary messages of ``descriptor`` (nesting bounded)."""
    cls = message_factory.GetMessageClass(descriptor)
    if descriptor.full_name == "google.protobuf.Struct":
        return st.builds(cls)
    fields = [f for f in descriptor.fields if f.type != FieldDescriptor.TYPE_MESSAGE or depth < 3]
    values = {
        f.name: st.none()
        | (st.lists(_value(f, depth), max_size=3) if _repeated(f) else _value(f, depth))
        for f in fields
    }

    def build(chosen: dict[str, Any]) -> Any:
        message = cls()
        for name, value in chosen.items():
            if value is None:
                continue
            field = descriptor.fields_by_name[name]
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                continue
            if _repeated(field):
                target = getattr(message, name)
                for item in value:
                    if field.type == FieldDescriptor.TYPE_MESSAGE:
                        target.add().CopyFrom(item)
                    else:
                        target.append(item)
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                getattr(message, name).CopyFrom(value)
            else:
                setattr(message, name, value)
        return message

    return st.fixed_dictionaries(values).map(build)


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.full_name == "google.protobuf.Duration":
            cls = message_factory.GetMessageClass(field.message_type)
            return st.builds(
                cls, seconds=st.integers(-10, 10**6), nanos=st.integers(0, 999_999_999)
            )
        return st.deferred(lambda: message_of(field.message_type, depth + 1))
    return SCALARS[field.type]


@pytest.fixture(scope="module")
def threaded_address() -> Iterator[str]:
    """A sidecar on its own loop in a thread; yields its address."""
    ready = threading.Event()
    stop: list[asyncio.Event] = []
    address: list[str] = []

    async def serve() -> None:
        config = ServerConfig(
            token=TOKEN, listen="127.0.0.1:0", store_uri="memory://",
            python_tools={"echo": ECHO}, heartbeat_s=0.2, grace_s=0.1,
        )  # fmt: skip
        async with Sidecar(config) as server:
            stop.append(asyncio.Event())
            address.append(server.address)
            ready.set()
            await stop[0].wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield address[0]
    loop.call_soon_threadsafe(stop[0].set)
    thread.join(10)
    loop.close()


METHODS = [
    (service.name, method.name, method.input_type, method.client_streaming, method.server_streaming)
    for service in pb.DESCRIPTOR.services_by_name.values()
    for method in service.methods
]


@pytest.mark.parametrize(
    ("service", "method", "input_type", "client_stream", "server_stream"),
    METHODS,
    ids=[f"{m[0]}.{m[1]}" for m in METHODS],
)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_request_gets_a_documented_code(
    threaded_address: str,
    service: str,
    method: str,
    input_type: Descriptor,
    client_stream: bool,
    server_stream: bool,
    data: st.DataObject,
) -> None:  # fmt: skip
    messages = data.draw(
        st.lists(message_of(input_type), min_size=1, max_size=3 if client_stream else 1)
    )
    metadata = (("authorization", f"Bearer {TOKEN}"),)
    with grpc.insecure_channel(threaded_address) as channel:
        stub = getattr(pb_grpc, f"{service}Stub")(channel)
        call = getattr(stub, method)
        failure: grpc.RpcError | None = None
        try:
            if client_stream:
                for _ in call(iter(messages), metadata=metadata, timeout=0.5):
                    pass
            elif server_stream:
                for _ in call(messages[0], metadata=metadata, timeout=0.3):
                    pass
            else:
                call(messages[0], metadata=metadata, timeout=5)
        except grpc.RpcError as error:
            failure = error
        if failure is not None:
            assert failure.code() in ALLOWED, (failure.code(), failure.details())
        system = pb_grpc.SystemServiceStub(channel)  # type: ignore[no-untyped-call]
        info = system.GetServerInfo(pb.GetServerInfoRequest(), metadata=metadata, timeout=5)
        assert "oma.v1" in info.api_versions  # the server is still serving

"""Request bytes that do not decode are a malformed request: INVALID_ARGUMENT, not UNKNOWN.

grpc decodes a request before the handler runs, and reports a failure to decode as UNKNOWN
with no detail. This interceptor takes the decoding over for the ``oma.v1`` services: the
handler gets the raw bytes and decodes them itself, so bytes that are not the request message
end the call like any other malformed request, through ``status.abort``: INVALID_ARGUMENT,
reason ``VALIDATION``, field ``request``. Decoding here is also where every request meets the
input quota (``sidecar.quotas``), before a handler can store any of it.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from sidecar.defaults import DEFAULT_MAX_INPUT_BYTES
from sidecar.quotas import check_input_size
from sidecar.status import InvalidArgument, SidecarError, abort

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

OMA_PREFIX = "/oma.v1."


class DecodingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Lets the ``oma.v1`` handlers decode their own requests (see the module docstring).

    Args:
        max_input_bytes: the largest request (each message of a stream) a handler gets.
    """

    def __init__(self, *, max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> None:
        self._max_input_bytes = max_input_bytes

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        """The handler, taking raw bytes for an ``oma.v1`` method."""
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or handler.request_deserializer is None:
            return handler
        if not method.startswith(OMA_PREFIX):
            return handler
        return _decoding(handler, self._max_input_bytes)


def decode(deserialize: Callable[[bytes], Any], raw: bytes, limit: int) -> Any:
    """The request message in ``raw``, if it is at most ``limit`` bytes.

    Raises:
        InvalidArgument: ``raw`` is not a serialized request message (field ``request``).
        InputTooLargeError: ``raw`` is over ``limit`` (naming its largest field).
    """
    try:
        message = deserialize(raw)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise InvalidArgument(
            "request", f"does not decode as the request message ({exc})"
        ) from None
    check_input_size(message, len(raw), limit)
    return message


async def _decoded_stream(
    deserialize: Callable[[bytes], Any], raw: AsyncIterator[bytes], limit: int
) -> AsyncIterator[Any]:
    async for item in raw:
        yield decode(deserialize, item, limit)


def _decoding(handler: Any, limit: int) -> Any:
    """``handler`` with its request decoding (and input quota) moved into the call."""
    deserialize = handler.request_deserializer
    serialize = handler.response_serializer
    if handler.request_streaming:
        behavior = handler.stream_stream or handler.stream_unary

        def requests(raw: Any) -> Any:
            return _decoded_stream(deserialize, raw, limit)

    else:
        behavior = handler.unary_unary or handler.unary_stream

        def requests(raw: Any) -> Any:
            return decode(deserialize, raw, limit)

    if inspect.isasyncgenfunction(behavior):

        async def streaming(raw: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            try:
                request = requests(raw)
            except SidecarError as exc:
                await abort(context, exc)
            async for response in behavior(request, context):
                yield response

        wrapped: Any = streaming
    else:

        async def plain(raw: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                request = requests(raw)
            except SidecarError as exc:
                await abort(context, exc)
            return await behavior(request, context)

        wrapped = plain
    make = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(handler.request_streaming, handler.response_streaming)]
    return make(wrapped, request_deserializer=None, response_serializer=serialize)

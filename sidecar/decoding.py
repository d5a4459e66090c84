"""Request bytes that do not decode are a malformed request: INVALID_ARGUMENT, not UNKNOWN.

grpc decodes a request before the handler runs, and reports a failure to decode as UNKNOWN
with no detail. This interceptor takes the decoding over for the ``oma.v1`` services: the
handler gets the raw bytes and decodes them itself, so bytes that are not the request message
end the call like any other malformed request, through ``status.abort``: INVALID_ARGUMENT,
reason ``VALIDATION``, field ``request``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from sidecar.status import InvalidArgument, abort

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

OMA_PREFIX = "/oma.v1."


class DecodingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Lets the ``oma.v1`` handlers decode their own requests (see the module docstring)."""

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
        return _decoding(handler)


def decode(deserialize: Callable[[bytes], Any], raw: bytes) -> Any:
    """The request message in ``raw``.

    Raises:
        InvalidArgument: ``raw`` is not a serialized request message (field ``request``).
    """
    try:
        return deserialize(raw)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise InvalidArgument(
            "request", f"does not decode as the request message ({exc})"
        ) from None


async def _decoded_stream(
    deserialize: Callable[[bytes], Any], raw: AsyncIterator[bytes]
) -> AsyncIterator[Any]:
    async for item in raw:
        yield decode(deserialize, item)


def _decoding(handler: Any) -> Any:
    """``handler`` with its request decoding moved into the call."""
    deserialize = handler.request_deserializer
    serialize = handler.response_serializer
    if handler.request_streaming:
        behavior = handler.stream_stream or handler.stream_unary

        def requests(raw: Any) -> Any:
            return _decoded_stream(deserialize, raw)

    else:
        behavior = handler.unary_unary or handler.unary_stream

        def requests(raw: Any) -> Any:
            return decode(deserialize, raw)

    if inspect.isasyncgenfunction(behavior):

        async def streaming(raw: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            try:
                request = requests(raw)
            except InvalidArgument as exc:
                await abort(context, exc)
            async for response in behavior(request, context):
                yield response

        wrapped: Any = streaming
    else:

        async def plain(raw: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                request = requests(raw)
            except InvalidArgument as exc:
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

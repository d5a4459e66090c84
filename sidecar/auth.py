"""Bearer-token auth: where the token comes from, and the interceptor that checks it.

Every RPC except ``grpc.health.v1.Health/*`` needs ``authorization: Bearer <token>``. The token
comes from ``OMA_SIDECAR_TOKEN``, else from ``--token-file``, else a random one is generated and
written to a 0600 file whose path the server prints. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from sidecar.defaults import DEFAULT_TOKEN_FILE, TOKEN_ENV
from sidecar.status import Unauthenticated, map_error, trailers

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from pathlib import Path

PUBLIC_PREFIXES = ("/grpc.health.v1.Health/",)


@dataclass(frozen=True, slots=True, kw_only=True)
class Token:
    """The server's token and where it came from (``env``, ``file`` or ``generated``)."""

    value: str
    source: str
    path: Path | None = None


def resolve_token(
    *, token_file: Path | None, env: Mapping[str, str], generated_path: Path = DEFAULT_TOKEN_FILE
) -> Token:
    """The token in force.

    Raises:
        ValueError: the environment variable or the file holds an empty token.
        OSError: the token file cannot be read, or the generated one cannot be written.
    """
    from_env = env.get(TOKEN_ENV)
    if from_env is not None:
        if not from_env.strip():
            raise ValueError(f"{TOKEN_ENV} is set but empty")
        return Token(value=from_env.strip(), source="env")
    if token_file is not None:
        value = token_file.read_text(encoding="utf-8").strip()
        if not value:
            raise ValueError(f"token file {token_file} is empty")
        return Token(value=value, source="file", path=token_file)
    value = secrets.token_urlsafe(32)
    write_private(generated_path, value + "\n")
    return Token(value=value, source="generated", path=generated_path)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by the owner only (0600), replacing any old file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def check_bearer(metadata: tuple[tuple[str, str | bytes], ...] | None, token: str) -> bool:
    """Whether ``metadata`` carries ``authorization: Bearer <token>`` (constant-time compare)."""
    expected = f"Bearer {token}".encode()
    for key, value in metadata or ():
        if key.lower() == "authorization":
            given = value if isinstance(value, bytes) else value.encode()
            return hmac.compare_digest(given, expected)
    return False


class BearerAuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses every RPC but health without the right bearer token (UNAUTHENTICATED)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        """Let the call through, or replace its handler with one that aborts."""
        method: str = handler_call_details.method
        if method.startswith(PUBLIC_PREFIXES):
            return await continuation(handler_call_details)
        if check_bearer(handler_call_details.invocation_metadata, self._token):
            return await continuation(handler_call_details)
        handler = await continuation(handler_call_details)
        return _refusing(handler)


def _refusing(handler: Any) -> Any:
    """A handler of the same shape as ``handler`` that aborts with UNAUTHENTICATED."""
    mapped = map_error(
        Unauthenticated("UNAUTHENTICATED", "missing or invalid 'authorization: Bearer' token")
    )

    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(mapped.code, mapped.message, trailing_metadata=trailers(mapped))

    if handler is None:
        return None
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)

"""Bearer-token auth: where the token comes from, and the interceptor that checks it.

Every RPC except ``grpc.health.v1.Health/*`` needs ``authorization: Bearer <token>`` (the
scheme in any case, as HTTP says). The token comes from ``OMA_SIDECAR_TOKEN``, else from
``--token-file``, else from the generated token file: a token already there is kept, so a restart
or a second sidecar does not lock out the hosts that read it; only when there is none is a random
one generated and written (0600, never over a file that appeared meanwhile). With
``--principals`` (``sidecar.principals``) the token names a principal instead, whose roles must
allow the RPC. Tokens are compared in constant time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from sidecar.access import allowed, roles_for
from sidecar.defaults import DEFAULT_TOKEN_FILE, TOKEN_ENV
from sidecar.status import (
    PermissionDenied,
    SidecarError,
    Unauthenticated,
    map_error,
    rich_status,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
    from pathlib import Path

    from sidecar.principals import Principals

PUBLIC_PREFIXES = ("/grpc.health.v1.Health/",)
DRAIN_S = 2.0  # how long a refused stream's requests are read before the refusal
DRAIN_MESSAGES = 64


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
    existing = _read_token(generated_path)
    if existing is None:
        existing = _create_token(generated_path)
    return Token(value=existing, source="generated", path=generated_path)


def _read_token(path: Path) -> str | None:
    """The token in ``path``, or ``None`` when there is no file (or only an empty one)."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    if value and os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o600)  # an older or hand-made file: the token is a secret
    return value or None


def _create_token(path: Path) -> str:
    """Write a new token to ``path`` unless another process just did; the token in force."""
    value = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = _write_temp(path, value + "\n")
    try:
        os.link(temp, path)  # atomic, and never over a file: two starting sidecars agree
    except FileExistsError:
        if path.stat().st_size == 0:  # an empty file holds no token: replace it
            os.replace(temp, path)
            return value
        existing = _read_token(path)
        if existing is None:
            raise ValueError(f"token file {path} is empty") from None
        return existing
    finally:
        temp.unlink(missing_ok=True)
    return value


def _write_temp(path: Path, text: str) -> Path:
    """A new 0600 file beside ``path`` holding ``text``."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temp, 0o600)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def bearer_credentials(metadata: tuple[tuple[str, str | bytes], ...] | None) -> bytes | None:
    """The credentials of the first ``authorization: Bearer <credentials>`` entry, or ``None``.

    The scheme is case-insensitive (RFC 9110: ``bearer`` and ``BEARER`` are ``Bearer``).
    """
    for key, value in metadata or ():
        if key.lower() == "authorization":
            given = value if isinstance(value, bytes) else value.encode()
            scheme, _, credentials = given.strip().partition(b" ")
            if scheme.lower() != b"bearer":
                return None
            return credentials.strip()
    return None


def check_bearer(metadata: tuple[tuple[str, str | bytes], ...] | None, token: str) -> bool:
    """Whether ``metadata`` carries ``authorization: Bearer <token>`` (constant-time compare).

    The token is compared exactly.
    """
    credentials = bearer_credentials(metadata)
    return credentials is not None and hmac.compare_digest(credentials, token.encode())


class BearerAuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses every RPC but health without a known bearer token (UNAUTHENTICATED).

    With ``principals`` the token must be one of theirs, and the RPC must be one the
    principal's roles allow (``sidecar.access``; PERMISSION_DENIED otherwise); ``token`` is
    then not used.
    """

    def __init__(self, token: str, *, principals: Principals | None = None) -> None:
        self._token = token
        self._principals = principals

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        """Let the call through, or replace its handler with one that aborts."""
        method: str = handler_call_details.method
        if method.startswith(PUBLIC_PREFIXES):
            return await continuation(handler_call_details)
        metadata = handler_call_details.invocation_metadata
        if self._principals is None:
            if check_bearer(metadata, self._token):
                return await continuation(handler_call_details)
            return _refusing(await continuation(handler_call_details), UNAUTHENTICATED)
        credentials = bearer_credentials(metadata)
        caller = None if credentials is None else self._principals.identify(credentials)
        if caller is None:
            return _refusing(await continuation(handler_call_details), UNAUTHENTICATED)
        if not allowed(method, caller):
            denied = PermissionDenied(
                "ROLE_REQUIRED",
                f"principal {caller.principal!r} may not call {method} "
                f"(needs one of the roles {sorted(roles_for(method))})",
            )
            return _refusing(await continuation(handler_call_details), denied)
        return await continuation(handler_call_details)


UNAUTHENTICATED = Unauthenticated(
    "UNAUTHENTICATED", "missing or invalid 'authorization: Bearer' token"
)


def _refusing(handler: Any, error: SidecarError) -> Any:
    """A handler of the same shape as ``handler`` that aborts with ``error``."""
    mapped = map_error(error)

    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort_with_status(rich_status(mapped))

    async def refuse_stream(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> None:
        # Aborting while the client still writes its stream can reach the client as INTERNAL
        # instead of UNAUTHENTICATED. Read what it sends (raw, undecoded, bounded) first.
        with contextlib.suppress(Exception, TimeoutError):
            async with asyncio.timeout(DRAIN_S):
                count = 0
                async for _ in requests:
                    count += 1
                    if count >= DRAIN_MESSAGES:
                        break
        await refuse(None, context)

    if handler is None:
        return None
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse_stream)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)

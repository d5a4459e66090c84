"""What both SDK adapters share: retries around one request, closing the HTTP client, and the
conventions both follow when a provider's answer or error needs care (unparsed tool arguments,
credentials echoed in an error body, an exception with no text)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from oma_actors.domain.messages import UNPARSED_ARGUMENTS
from oma_actors.errors import LLMError, ProviderError
from oma_actors.llm.retry import with_retries

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

T = TypeVar("T")

PLACEHOLDER_KEY = "unused"
"""The key sent to a ``base_url`` server when none was given: local proxies and compatible
servers need none, but both SDKs refuse to send a request without one."""

REDACTED = "[redacted]"
"""What an adapter's own credentials are replaced with in the errors it raises."""

# A credential shorter than this is no real key (tests pass "k"); masking it would garble the
# message (every "k" in it) and protect nothing.
_MIN_SECRET_CHARS = 8


def unparsed_arguments(raw: object) -> dict[str, Any]:
    """The input of a tool call whose arguments are not a JSON object (``UNPARSED_ARGUMENTS``).

    Args:
        raw: the arguments as the provider sent them: text, or an already-decoded value.

    Returns:
        ``{UNPARSED_ARGUMENTS: text}``, the text being ``raw`` itself or its JSON.
    """
    return {UNPARSED_ARGUMENTS: raw if isinstance(raw, str) else json.dumps(raw, default=str)}


def describe(exc: BaseException) -> str:
    """``str(exc)``, or the exception's type name when that is empty.

    A connection reset mid-response raises an ``httpx`` error with no text; a log line or a
    failure reason ending in "connection failed: " would name nothing.
    """
    return str(exc) or type(exc).__name__


class _Closable(Protocol):
    async def close(self) -> None: ...


class SDKAdapter:
    """Base of the adapters built on an official SDK client.

    Subclasses set ``_client``, ``_provider``, ``_max_retries`` and ``_retry_base_delay``, and
    call ``_keep_secret`` with the credentials the client sends.
    """

    _client: _Closable
    _provider: str
    _max_retries: int
    _retry_base_delay: float
    _secrets: tuple[str, ...] = ()

    def _keep_secret(self, *credentials: object) -> None:
        """Remember the credentials to mask in this adapter's errors (non-strings are skipped)."""
        self._secrets = tuple(
            secret
            for secret in credentials
            if isinstance(secret, str)
            and len(secret) >= _MIN_SECRET_CHARS
            and secret != PLACEHOLDER_KEY
        )

    def _mask_secrets(self, error: LLMError) -> None:
        """Replace this adapter's credentials in ``error``'s message with ``REDACTED``.

        Some providers and proxies echo a rejected key in their error body; the message becomes
        a task's failure reason, a journal record and log lines, none of which may hold a key.
        The SDK exception chained as ``__cause__`` keeps the raw body (the retry policy reads
        its response headers).
        """
        text = str(error)
        masked = text
        for secret in self._secrets:
            masked = masked.replace(secret, REDACTED)
        if masked != text:
            error.args = (masked,)

    async def _retried(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` with this adapter's retry policy for transient provider errors."""

        async def once() -> T:
            try:
                return await call()
            except json.JSONDecodeError as err:
                # The SDKs let a non-JSON success body escape as a bare JSONDecodeError.
                raise ProviderError(
                    self._provider, "response body is not JSON", status=200
                ) from err
            except LLMError as err:
                # Every error of both adapters passes here, so none leaves with a key in it.
                self._mask_secrets(err)
                raise

        return await with_retries(
            once,
            attempts=self._max_retries + 1,
            base_delay=self._retry_base_delay,
            provider=self._provider,
        )

    async def aclose(self) -> None:
        """Close the HTTP client; the adapter cannot be used afterwards."""
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

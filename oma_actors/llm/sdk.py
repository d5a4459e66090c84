"""What both SDK adapters share: retries around one request, and closing the HTTP client."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Protocol, Self, TypeVar

from oma_actors.errors import ProviderError
from oma_actors.llm.retry import with_retries

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

T = TypeVar("T")


class _Closable(Protocol):
    async def close(self) -> None: ...


class SDKAdapter:
    """Base of the adapters built on an official SDK client.

    Subclasses set ``_client``, ``_provider``, ``_max_retries`` and ``_retry_base_delay``.
    """

    _client: _Closable
    _provider: str
    _max_retries: int
    _retry_base_delay: float

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

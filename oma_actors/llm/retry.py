"""Retrying model calls: which HTTP failures are transient, and how long to wait between tries.

The adapters turn off the SDKs' own retries and use this instead, so that every failure surfaces
as one of our typed ``LLMError`` subclasses and the retry policy is the same for every provider.
The retry loop and the jittered backoff are tenacity's; this module adds what is ours: which
errors are retryable, and the server's ``retry-after``.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import tenacity

from oma_actors.errors import (
    AuthenticationError,
    LLMError,
    OverloadedError,
    ProviderError,
    RateLimitError,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_DELAY = 30.0
"""The longest single wait, in seconds, whether from backoff or from a ``retry-after`` header."""

# 501 Not Implemented is a permanent answer; every other 5xx (including proxies' 52x and
# Anthropic's 529 "overloaded") is the server's trouble and may pass.
_PERMANENT_SERVER_ERRORS = frozenset({501})
# 408 is the server timing out on us, as transient as a connection timeout; 409 is a request
# colliding with a concurrent one (a lock timeout, say), which both SDKs retry too.
_TRANSIENT_CLIENT_ERRORS = frozenset({408, 409})


def error_for_status(provider: str, status: int, message: str) -> LLMError:
    """Classify an HTTP error status into the matching ``LLMError`` subclass.

    Args:
        provider: the provider name recorded on the error.
        status: the HTTP status code of the failed response.
        message: the provider's explanation, as readable as the SDK gives it.

    Returns:
        ``AuthenticationError`` for 401/403, ``RateLimitError`` for 429, ``OverloadedError`` for
        408, 409 and transient 5xx (500, 502-504, 529, ...), ``ProviderError`` for anything else
        (spec TQ-10: of the 4xx only 408, 409 and 429 are retryable).
    """
    text = f"HTTP {status}: {message}"
    if status in (401, 403):
        return AuthenticationError(provider, text, status=status)
    if status == 429:
        return RateLimitError(provider, text, status=status)
    if status in _TRANSIENT_CLIENT_ERRORS or (
        status >= 500 and status not in _PERMANENT_SERVER_ERRORS
    ):
        return OverloadedError(provider, text, status=status)
    return ProviderError(provider, text, status=status)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Read the server's requested wait from ``retry-after-ms`` or ``retry-after``.

    Args:
        headers: response headers (any case-insensitive mapping, e.g. ``httpx`` headers).

    Returns:
        The wait in seconds, or ``None`` when the headers ask for nothing usable.
    """
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        seconds: float | None
        try:
            seconds = float(value) * scale
        except ValueError:
            seconds = _http_date_delta(value) if name == "retry-after" else None
        if seconds is not None and seconds >= 0:
            return seconds
    return None


class BackoffWait(tenacity.wait.wait_base):
    """The wait before each retry: the server's ``retry-after`` or full-jitter backoff.

    A server-requested wait (read from the ``__cause__`` the adapter chained) wins; otherwise
    tenacity's ``wait_random_exponential``, a uniform draw from ``[0, base_delay * 2**retry]``
    ("full jitter", so that many clients throttled together do not come back in lockstep).
    Either way the wait is at most ``max_delay``.
    """

    def __init__(self, *, base_delay: float, max_delay: float = MAX_DELAY) -> None:
        self.max_delay = max_delay
        self.jitter = tenacity.wait_random_exponential(multiplier=base_delay, max=max_delay)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        """Seconds to wait after the attempt ``retry_state`` describes."""
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        retry_after = _retry_after_of(error) if isinstance(error, LLMError) else None
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        return float(self.jitter(retry_state))


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    base_delay: float,
    provider: str,
    max_delay: float = MAX_DELAY,
) -> T:
    """Await ``call()`` up to ``attempts`` times, retrying only retryable ``LLMError``s.

    The loop is tenacity's (``BackoffWait`` between tries). The server's ``retry-after`` is
    honoured when the error's ``__cause__`` (the SDK exception the adapter chained) carries the
    HTTP response. Cancellation is never caught: a cancelled call or a cancelled sleep
    propagates at once (``CancelledError`` is no ``LLMError``, so it is never retried).

    Args:
        call: makes one attempt; raises an ``LLMError`` on failure.
        attempts: total attempts, at least 1 (so ``max_retries + 1``).
        base_delay: the backoff unit in seconds.
        provider: the provider name, for log lines.
        max_delay: the cap on any single wait.

    Returns:
        The first successful result.

    Raises:
        LLMError: the last failure, when it is not retryable or attempts ran out; if there was
            more than one attempt, a note on the exception says how many.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    tried = 0

    async def attempt() -> T:
        nonlocal tried
        tried += 1
        return await call()

    def log(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        logger.info(
            "%s call failed (%s); retry %d/%d in %.3fs",
            provider,
            error,
            state.attempt_number,
            attempts - 1,
            state.upcoming_sleep,
        )

    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=BackoffWait(base_delay=base_delay, max_delay=max_delay),
        retry=tenacity.retry_if_exception(lambda exc: isinstance(exc, LLMError) and exc.retryable),
        before_sleep=log,
        reraise=True,  # the typed error itself, not tenacity's RetryError
    )
    try:
        return await retrying(attempt)
    except LLMError as err:
        if tried > 1:
            err.add_note(f"{provider}: gave up after {tried} attempts")
        raise


def _retry_after_of(err: LLMError) -> float | None:
    # Both SDKs' status errors expose the httpx response as ``.response``; duck typing keeps
    # this module free of SDK imports.
    response = getattr(err.__cause__, "response", None)
    headers = getattr(response, "headers", None)
    return retry_after_seconds(headers) if isinstance(headers, Mapping) else None


def _http_date_delta(value: str) -> float | None:
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed)) - time.time())

"""The retry policy: status classification, retry-after parsing, backoff and the retry loop."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest
import tenacity

from oma_actors.errors import (
    AuthenticationError,
    LLMError,
    OverloadedError,
    ProviderError,
    RateLimitError,
)
from oma_actors.llm.retry import (
    MAX_DELAY,
    BackoffWait,
    error_for_status,
    retry_after_seconds,
    with_retries,
)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, ProviderError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, ProviderError),
        (408, OverloadedError),
        (409, OverloadedError),  # spec TQ-10: 408, 409 and 429 are the retryable 4xx
        (413, ProviderError),
        (422, ProviderError),
        (429, RateLimitError),
        (500, OverloadedError),
        (501, ProviderError),
        (502, OverloadedError),
        (503, OverloadedError),
        (504, OverloadedError),
        (529, OverloadedError),
    ],
)
def test_error_for_status(status: int, kind: type[LLMError]) -> None:
    error = error_for_status("p", status, "why")

    assert type(error) is kind
    assert (error.provider, error.status) == ("p", status)
    assert str(error) == f"p: HTTP {status}: why"


def test_retry_after_seconds() -> None:
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)

    assert retry_after_seconds(None) is None
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "junk", "retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "-1"}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert 8.0 <= (retry_after_seconds({"retry-after": in_ten}) or 0.0) <= 10.0


def waited(wait: BackoffWait, retry: int, error: BaseException | None = None) -> float:
    """The wait ``wait`` gives after attempt ``retry + 1`` failed with ``error``."""
    state = tenacity.RetryCallState(tenacity.AsyncRetrying(), None, (), {})
    state.attempt_number = retry + 1
    failure = error or OverloadedError("p", "503")
    state.set_exception((type(failure), failure, None))
    return wait(state)


def after_asking(seconds: str) -> RateLimitError:
    error = RateLimitError("p", "429")
    error.__cause__ = _SdkError({"retry-after": seconds})
    return error


def test_backoff_is_full_jitter_and_capped() -> None:
    for retry in range(6):
        for _ in range(50):
            assert 0.0 <= waited(BackoffWait(base_delay=0.5), retry) <= 0.5 * 2**retry
    draws = {waited(BackoffWait(base_delay=0.5), 3) for _ in range(20)}
    assert len(draws) > 1  # jittered, not a fixed schedule
    assert waited(BackoffWait(base_delay=1.0), 200) <= MAX_DELAY
    assert waited(BackoffWait(base_delay=0.5), 0, after_asking("2")) == 2.0
    assert waited(BackoffWait(base_delay=0.5), 0, after_asking("999")) == MAX_DELAY
    assert waited(BackoffWait(base_delay=0.5, max_delay=1.0), 0, after_asking("9")) == 1.0


class Flaky:
    """Fails with the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.called = asyncio.Event()

    async def __call__(self) -> str:
        self.calls += 1
        self.called.set()
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


async def test_retryable_errors_are_retried() -> None:
    call = Flaky(RateLimitError("p", "429"), OverloadedError("p", "503"))

    assert await with_retries(call, attempts=3, base_delay=0.001, provider="p") == "ok"
    assert call.calls == 3


async def test_non_retryable_error_is_raised_at_once() -> None:
    call = Flaky(AuthenticationError("p", "401"), OverloadedError("p", "503"))

    with pytest.raises(AuthenticationError) as caught:
        await with_retries(call, attempts=5, base_delay=0.001, provider="p")

    assert call.calls == 1
    assert not getattr(caught.value, "__notes__", [])


async def test_last_error_is_raised_when_attempts_run_out() -> None:
    last = OverloadedError("p", "third")
    call = Flaky(OverloadedError("p", "first"), RateLimitError("p", "second"), last)

    with pytest.raises(OverloadedError) as caught:
        await with_retries(call, attempts=3, base_delay=0.001, provider="p")

    assert caught.value is last
    assert caught.value.__notes__ == ["p: gave up after 3 attempts"]
    assert call.calls == 3


async def test_one_attempt_means_no_retry() -> None:
    call = Flaky(OverloadedError("p", "503"))

    with pytest.raises(OverloadedError):
        await with_retries(call, attempts=1, base_delay=0.001, provider="p")
    assert call.calls == 1


async def test_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="attempts"):
        await with_retries(Flaky(), attempts=0, base_delay=0.001, provider="p")


class _Response:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


class _SdkError(Exception):
    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__("sdk")
        self.response = _Response(headers)


async def test_retry_after_of_the_chained_sdk_error_is_honoured() -> None:
    error = RateLimitError("p", "429")
    error.__cause__ = _SdkError({"retry-after-ms": "150"})
    call = Flaky(error)

    started = time.monotonic()
    await with_retries(call, attempts=2, base_delay=0.0, provider="p")

    assert time.monotonic() - started >= 0.15


async def test_cancellation_is_never_caught_or_retried() -> None:
    call = Flaky(asyncio.CancelledError())

    with pytest.raises(asyncio.CancelledError):
        await with_retries(call, attempts=5, base_delay=0.001, provider="p")
    assert call.calls == 1


async def test_cancellation_during_backoff_propagates() -> None:
    call = Flaky(OverloadedError("p", "503"))
    task = asyncio.create_task(with_retries(call, attempts=2, base_delay=60.0, provider="p"))
    # The failing call and the start of the backoff sleep happen in one step of the task.
    await call.called.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert call.calls == 1

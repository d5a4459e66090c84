"""A task's retry delay (spec TQ-10), with OMA's clamps (``executeWithRetry``): a negative base
delay counts as 0 and a backoff below 1 as 1, so no delay is negative or shrinks."""

from __future__ import annotations

import pytest

from oma_actors.agents.runner import MAX_RETRY_DELAY_MS, retry_delay_ms
from oma_actors.domain.tasks import TaskState


def _task(delay: int, backoff: float) -> TaskState:
    return TaskState(
        id="t", title="t", description="d", status="in_progress",
        retry_delay_ms=delay, retry_backoff=backoff,
    )  # fmt: skip


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_the_delay_is_jittered_between_half_and_the_whole_nominal(attempt: int) -> None:
    nominal = 1000 * 2 ** (attempt - 1)
    for _ in range(50):
        assert nominal / 2 <= retry_delay_ms(_task(1000, 2.0), attempt) <= nominal


def test_a_negative_base_delay_counts_as_none() -> None:
    assert {retry_delay_ms(_task(-500, 2.0), attempt) for attempt in (1, 2, 3)} == {0}


def test_a_backoff_below_one_does_not_shrink_the_delay() -> None:
    for attempt in (1, 2, 5):
        assert 500 <= retry_delay_ms(_task(1000, 0.5), attempt) <= 1000


def test_the_delay_is_capped() -> None:
    assert retry_delay_ms(_task(10_000, 10.0), 6) <= MAX_RETRY_DELAY_MS

"""``task_from_json``: dates that cannot be parsed become the injected clock's now (spec TQ-12)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oma_actors.domain.jsonforms import task_from_json, task_to_json
from oma_actors.domain.taskforms import plan_revision_from_json
from oma_actors.domain.tasks import TaskState
from oma_actors.errors import CheckpointError
from oma_actors.testing.clock import FakeClock

CREATED = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
NOW = datetime(2030, 1, 1, tzinfo=UTC)


def task_json(**changes: object) -> dict[str, object]:
    task = TaskState(
        id="t1", title="T", description="d", status="pending", created_at=CREATED,
        updated_at=CREATED,
    )  # fmt: skip
    return {**task_to_json(task), **changes}


def test_stored_dates_round_trip_and_the_clock_is_not_read() -> None:
    task = task_from_json(task_json(), clock=FakeClock(NOW))
    assert task.created_at == CREATED
    assert task.updated_at == CREATED


@pytest.mark.parametrize("bad", ["yesterday", "", None, 12])
def test_an_unparseable_date_becomes_the_clocks_now_instead_of_failing(bad: object) -> None:
    raw = task_json(createdAt=bad)
    task = task_from_json(raw, clock=FakeClock(NOW))
    assert task.created_at == NOW
    assert task.updated_at == CREATED


def test_a_missing_date_becomes_now_too() -> None:
    raw = task_json()
    del raw["updatedAt"]
    assert task_from_json(raw, clock=FakeClock(NOW)).updated_at == NOW


def test_the_default_clock_is_the_system_clock() -> None:
    before = datetime.now(UTC)
    task = task_from_json(task_json(createdAt="garbage"))
    assert before <= task.created_at <= datetime.now(UTC)


def test_a_task_without_an_id_is_refused() -> None:
    with pytest.raises(CheckpointError):
        task_from_json({"title": "no id"}, clock=FakeClock(NOW))


@pytest.mark.parametrize("value", ["2", 1.5, True])
@pytest.mark.parametrize("key", ["supersededByRevision", "recoveredByRevision"])
def test_a_revision_that_is_no_integer_is_refused(key: str, value: object) -> None:
    # A plan revision number decides which tasks a revision replaced: never coerced.
    with pytest.raises(CheckpointError, match=f"task 't1' has a non-integer {key}"):
        task_from_json(task_json(**{key: value}))
    assert task_from_json(task_json(**{key: 2})).superseded_by_revision == (
        2 if key == "supersededByRevision" else None
    )


@pytest.mark.parametrize("raw", ["revision 1", 1, None])
def test_a_plan_revision_that_is_no_object_is_refused(raw: object) -> None:
    with pytest.raises(CheckpointError, match="plan revision is not an object"):
        plan_revision_from_json(raw)


def test_retry_fields_are_written_only_when_the_task_set_them_as_omas_snapshot() -> None:
    # OMA's taskToSnapshot writes retryDelayMs and retryBackoff only when the task set them;
    # we wrote the pair whenever maxRetries was set. A dispatch approval hashes the task's
    # snapshot, so an approval OMA wrote for such a task no longer matched ours and was
    # silently not used (the gate was asked again).
    raw = {
        "id": "a", "title": "A", "description": "d", "status": "pending", "maxRetries": 2,
        "createdAt": "2026-12-06T10:00:00.000Z", "updatedAt": "2026-12-06T10:00:00.000Z",
    }  # fmt: skip
    assert task_to_json(task_from_json(raw)) == raw
    both = {**raw, "retryDelayMs": 250, "retryBackoff": 1.5}
    assert task_to_json(task_from_json(both)) == both
    fresh = TaskState(id="b", title="B", description="d", status="pending", max_retries=1)
    assert "retryDelayMs" not in task_to_json(fresh)
    assert "retryBackoff" not in task_to_json(fresh)

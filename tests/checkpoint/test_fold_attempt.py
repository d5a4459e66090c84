"""The fold rule of ``run/start`` (D14): a journal-first restore's attempt is an append."""

from __future__ import annotations

from typing import Any

import pytest
from fold_support import RUN, entry, event, journaled

from oma_actors.domain.snapshot import RunIdentity
from oma_actors.journal.fold import Discarded, Folded, fold_tail


def identity(attempt: int = 2, **changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "runId": RUN, "attempt": attempt, "lastTraceId": "ab" * 16, "lastRootSpanId": "cd" * 8,
    }  # fmt: skip
    raw.update(changes)
    return raw


def start(seq: int = 101, **data: Any) -> Any:
    return event(seq, "run/start", task=None, agent=None, mode="restore", **data)


def test_a_restores_run_start_makes_its_attempt_and_identity_the_runs() -> None:
    snapshot = journaled(entry(mark=100))
    result = fold_tail(snapshot, [start(identity=identity())])
    assert isinstance(result, Folded)
    assert result.snapshot.attempt == 2
    assert result.snapshot.identity == RunIdentity(
        run_id=RUN, attempt=2, trace_id="ab" * 16, root_span_id="cd" * 8
    )


def test_the_last_attempt_wins() -> None:
    events = [start(101, identity=identity(2)), start(102, identity=identity(3))]
    result = fold_tail(journaled(entry(mark=100)), events)
    assert result.snapshot.attempt == 3


def test_omas_run_start_without_identity_changes_nothing() -> None:
    snapshot = journaled(entry(mark=100))
    result = fold_tail(snapshot, [start()])
    assert isinstance(result, Folded)
    assert (result.snapshot.attempt, result.snapshot.identity) == (
        snapshot.attempt,
        snapshot.identity,
    )


def test_a_run_start_at_or_below_the_watermark_is_already_in_the_snapshot() -> None:
    snapshot = journaled(entry(mark=100))
    result = fold_tail(snapshot, [start(100, identity=identity(5))])
    assert result.snapshot.attempt == snapshot.attempt


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not an object", "not an object"),
        (identity(attempt="2"), "malformed identity"),
        (identity(attempt=True), "malformed identity"),
        (identity(lastTraceId=None), "malformed identity"),
        (identity(runId="someone-else"), "identity of run"),
        (identity(attempt=1), "does not follow"),
    ],
)
def test_a_bad_identity_discards_the_tail(raw: object, reason: str) -> None:
    result = fold_tail(journaled(entry(mark=100)), [start(identity=raw)])
    assert isinstance(result, Discarded)
    assert reason in result.reason

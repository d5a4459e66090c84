"""``runner_to_json``/``runner_from_json``: an in-flight entry with OMA's members and no others."""

from __future__ import annotations

from typing import Any

from oma_actors.domain.inflight import RunnerState
from oma_actors.domain.jsonforms import runner_from_json, runner_to_json
from oma_actors.domain.messages import Message, TextBlock


def _completed(**changes: Any) -> RunnerState:
    prompt = Message("user", [TextBlock("look things up")])
    return RunnerState(
        phase="completed", conversation=(prompt,), turns=2, final_output="x", **changes
    )


def test_a_budget_failure_is_carried_by_budget_exceeded_alone() -> None:
    """OMA's in-flight entry has no ``success``: an over-budget completion must not add one."""
    over_budget = _completed(success=False, budget_exceeded=True)
    out = runner_to_json("t1", "worker", over_budget)
    assert "success" not in out
    assert out["budgetExceeded"] is True
    assert runner_from_json(out) == over_budget  # read back as failed


def test_a_failure_oma_never_persists_keeps_our_success_member() -> None:
    stopped = _completed(success=False)  # e.g. max_turns: no OMA member says it
    out = runner_to_json("t1", "worker", stopped)
    assert out["success"] is False
    assert runner_from_json(out) == stopped
    assert "success" not in runner_to_json("t1", "worker", _completed())

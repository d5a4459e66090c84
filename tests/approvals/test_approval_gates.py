"""``consult``: a gate's answer, sync or async, normalised to a verdict (spec AP-02, AP-03)."""

from __future__ import annotations

from typing import Any

import pytest

from oma_actors.approvals.gates import Allow, Deny, GateFailed, Suspend, consult


def boom(*_: object) -> bool:
    raise RuntimeError("gate down")


async def later(*_: object) -> bool:
    return True


@pytest.mark.parametrize(
    ("gate", "verdict"),
    [
        (lambda *_: True, Allow()),
        (lambda *_: False, Deny()),
        (later, Allow()),  # an async gate is awaited
        (lambda *_: Allow(), Allow()),
        (lambda *_: Deny("not on a Sunday"), Deny("not on a Sunday")),
        (lambda *_: Suspend("ask a human"), Suspend("ask a human")),
        (lambda *_: Suspend(), Suspend()),
        # Anything else is the gate's failure, named, never a crash of the run:
        (boom, GateFailed("RuntimeError: gate down")),
        (lambda *_: Deny(7), GateFailed("gate reason must be a string, not int")),  # type: ignore[arg-type]
        (lambda *_: Suspend(b"x"), GateFailed("gate reason must be a string, not bytes")),  # type: ignore[arg-type]
        (lambda *_: 1, GateFailed("gate answered 1; expected a bool, Allow, Deny or Suspend")),
        (
            lambda *_: None,
            GateFailed("gate answered None; expected a bool, Allow, Deny or Suspend"),
        ),
    ],
)
async def test_a_gate_answer_becomes_a_verdict(gate: Any, verdict: object) -> None:
    assert await consult(gate, "call") == verdict


async def test_the_gate_is_asked_with_the_arguments_given() -> None:
    seen: list[tuple[object, ...]] = []

    def gate(*args: object) -> bool:
        seen.append(args)
        return True

    await consult(gate, "run-1", {"tool": "charge"})
    assert seen == [("run-1", {"tool": "charge"})]

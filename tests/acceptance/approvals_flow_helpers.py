"""Helpers for the durable approvals end-to-end tests: one run id, a worker team, decisions."""

from __future__ import annotations

from collections.abc import Sequence

from oma_actors import AgentConfig, CheckpointOptions, Team
from oma_actors.approvals import Reviewer, decide_approval
from oma_actors.testing import ScriptedAdapter

RUN = "run-approvals"


def options(store: object) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id=RUN)  # type: ignore[arg-type]


def worker_team(adapter: ScriptedAdapter, *, tools: Sequence[object] = ()) -> Team:
    return Team("t", [AgentConfig("worker", adapter=adapter, tools=tools)])  # type: ignore[arg-type]


def never(*args: object) -> bool:
    raise AssertionError("the gate must not be asked again")


async def approve(
    store: object, request_id: str, request_hash: str, who: str = "reviewer-1"
) -> None:
    await decide_approval(
        store,  # type: ignore[arg-type]
        request_id=request_id,
        request_hash=request_hash,
        decision="approve",
        reviewer=Reviewer(who),
    )


async def reject(store: object, request_id: str, request_hash: str) -> None:
    await decide_approval(
        store,  # type: ignore[arg-type]
        request_id=request_id,
        request_hash=request_hash,
        decision="reject",
        reviewer=Reviewer("reviewer-2"),
    )

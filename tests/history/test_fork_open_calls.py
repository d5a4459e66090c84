"""A fork at a point where calls had started and not committed (decisions D17 and D1).

The fork has no team, so it marks every such call dispatched; the child's restore has one: a
call of a safe or idempotent tool runs again there (once), as after a crash, while a call of an
``unsafe`` tool is never run again (``TOOL_OUTCOME_UNKNOWN``). The parent's two tools both wait
until both have started, so the history has a point where both calls are open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

from history_support import MemoryWorkspace, Workspace, restore_run, run_journal_first
from two_calls import answer, of, two_tools

from oma_actors import Team
from oma_actors.checkpoint import Checkpoint, fork_run, run_history
from oma_actors.checkpoint.fork import FORK_MARKED
from oma_actors.events import ProgressEvent, ToolOutcomeUnknown
from oma_actors.keyspace import checkpoint_key
from oma_actors.llm import ChatOptions, LLMResponse, Message


async def both_open(space: Workspace, team: Team) -> int:
    """Run the parent; the seq of its point where both calls had started and neither committed
    (``risky`` dispatched, ``safe``'s ``tool/call``)."""
    assert (await run_journal_first(space, team, 1)).success
    labels = [(p.seq, p.label) for p in await run_history(space.store(), "r1")]
    turn = [label for _, label in labels if label.startswith("t0 turn 1: tool")]
    assert turn == [
        "t0 turn 1: tool risky dispatched",
        "t0 turn 1: tool safe dispatched",
        "t0 turn 1: tool safe committed",
        "t0 turn 1: tool risky committed",
    ]
    return next(seq for seq, label in labels if label == "t0 turn 1: tool safe dispatched")


async def test_a_fork_reruns_a_safe_open_call_and_never_an_unsafe_one(tmp_path: Path) -> None:
    space = Workspace(tmp_path)
    effects: list[tuple[str | None, str]] = []
    team = two_tools(effects)
    at = await both_open(space, team)
    assert sorted(of(effects, "r1")) == ["s0", "u0"]

    await fork_run(space.store(), "r1", at_seq=at, new_run_id="child")
    child = await Checkpoint(space.store(), run_id="child").load_latest()
    assert child is not None
    # Both marked (a reader that ignores the list never re-runs either), both listed.
    [entry] = child.in_flight
    assert {item.call.id: item.dispatched for item in entry.state.pending} == {
        "s0": True,
        "u0": True,
    }
    assert sorted(item["callId"] for item in child.raw[FORK_MARKED]) == ["s0", "u0"]

    events: list[ProgressEvent] = []
    result = await restore_run(space, team, "child", on_progress=events.append)

    assert result.success
    assert of(effects, "child") == ["s0"], "the safe call runs once in the child, never u0"
    assert [e.tool_call_id for e in events if isinstance(e, ToolOutcomeUnknown)] == ["u0"]
    final = await Checkpoint(space.store(), run_id="child").load_latest()
    assert final is not None
    assert FORK_MARKED not in final.raw, "consumed by the restore, not carried on"
    assert "safe a" in json.dumps(final.raw)
    assert sorted(of(effects, "r1")) == ["s0", "u0"], "the parent is untouched"


class HangsOnTurn2:
    """The model of an attempt that stops at its second turn: it never answers there."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if any(m.role == "assistant" for m in messages):
            self.waiting.set()
            await asyncio.Event().wait()
        return answer(messages, options)


async def test_a_second_restore_of_the_child_does_not_run_the_safe_call_again(
    tmp_path: Path,
) -> None:
    # The child's first restore re-runs the safe call, commits it (journal-only) and stops at
    # the next model turn, its latest snapshot still the fork's (with the list): the second
    # restore clears the mark again, then folds the commit from the journal and replays it.
    space = MemoryWorkspace(tmp_path)
    effects: list[tuple[str | None, str]] = []
    at = await both_open(space, two_tools(effects))
    await fork_run(space.store(), "r1", at_seq=at, new_run_id="child")
    model = HangsOnTurn2()
    first = asyncio.create_task(restore_run(space, two_tools(effects, model=model), "child"))
    await asyncio.wait_for(model.waiting.wait(), 5)
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    assert of(effects, "child") == ["s0"]
    latest = await Checkpoint(space.store(), run_id="child").load_latest()
    assert latest is not None
    assert FORK_MARKED in latest.raw, "the first restore wrote no snapshot"

    events: list[ProgressEvent] = []
    second = await restore_run(space, two_tools(effects), "child", on_progress=events.append)
    assert second.success
    assert of(effects, "child") == ["s0"], "committed in the child's journal: replayed"
    assert not [e for e in events if isinstance(e, ToolOutcomeUnknown)]


async def test_a_fork_of_the_child_at_its_first_point_keeps_the_list(tmp_path: Path) -> None:
    # The grandchild forks the child at the child's first point, whose state is the fork's
    # snapshot: the calls it lists are still open there, so the list is inherited.
    space = MemoryWorkspace(tmp_path)
    effects: list[tuple[str | None, str]] = []
    team = two_tools(effects)
    at = await both_open(space, team)
    await fork_run(space.store(), "r1", at_seq=at, new_run_id="child")
    await fork_run(space.store(), "child", at_seq=at, new_run_id="grand")
    entry = await space.store().get(checkpoint_key("grand"))
    assert entry is not None
    listed = json.loads(entry.value)[FORK_MARKED]
    assert sorted(item["callId"] for item in listed) == ["s0", "u0"]
    events: list[ProgressEvent] = []
    assert (await restore_run(space, team, "grand", on_progress=events.append)).success
    assert of(effects, "grand") == ["s0"]
    assert [e.tool_call_id for e in events if isinstance(e, ToolOutcomeUnknown)] == ["u0"]

"""The lossless re-save rule's limits (``checkpoint.carry``): what is carried, and what never is.

A member is copied from the source only when our typed state does not model it, and only into
the object of the same identity. These tests hold the guards that keep a carried member from
overriding the state: a ``dispatched`` mark a fork's restore cleared, a journal-first entry's
``messagesFrom`` under a save in OMA's full form, a default spelled with another type, and an
object that has no counterpart in the source.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from checkpoint_support import KEY, golden_json
from note_team import note_team, script

from oma_actors import CheckpointOptions, OpenMultiAgent, Task, Team
from oma_actors.checkpoint import decode, encode, journal_path
from oma_actors.checkpoint.fork import FORK_MARKED, clear_fork_marks
from oma_actors.checkpoint.validate import problem
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.keyspace import checkpoint_key
from oma_actors.llm import ChatOptions, LLMResponse, Message
from oma_actors.stores import InMemoryStore

Raw = dict[str, Any]

EXECUTING_ID = "22222222-3333-4444-8555-666666666666"
NOTE_CALL = "toolu_01Note00000000000000002"  # write_note, uncommitted in the golden
COMPLETED_ID = "11111111-2222-4333-8444-555555555555"


def _v4() -> Raw:
    raw = golden_json("v3.json")
    raw.update(version=4, pendingApprovals=[], approvalDecisions=[])
    return raw


def _by(items: list[Raw], key: str, value: str) -> Raw:
    (found,) = [item for item in items if item[key] == value]
    return found


def _note_call(raw: Raw) -> Raw:
    calls: list[Raw] = _by(raw["inFlightTasks"], "taskId", EXECUTING_ID)["pendingToolCalls"]
    return _by_call(calls, NOTE_CALL)


def _by_call(calls: list[Raw], call_id: str) -> Raw:
    (found,) = [p for p in calls if p["call"]["id"] == call_id]
    return found


def test_a_fork_mark_the_restore_cleared_is_not_carried_back_from_the_source() -> None:
    """Guards ``PENDING_CALL``'s ``dispatched``: the mark is ours (modelled), so a call whose mark
    ``clear_fork_marks`` cleared is written without it, although its source still says
    ``dispatched: true``. Carried back, the next save would mark the safe call dispatched
    again, and a restore from it would answer it ``TOOL_OUTCOME_UNKNOWN`` instead of running
    it (D1)."""
    raw = _v4()
    executing = _by(raw["inFlightTasks"], "taskId", EXECUTING_ID)
    _note_call(raw)["dispatched"] = True
    raw[FORK_MARKED] = [
        {"taskId": EXECUTING_ID, "assignee": executing["assignee"], "callId": NOTE_CALL}
    ]
    snapshot = decode(json.dumps(raw), key=KEY)

    cleared = clear_fork_marks(snapshot, {executing["assignee"]: {"write_note"}})
    out = json.loads(encode(cleared))

    assert "dispatched" not in _note_call(out)
    assert FORK_MARKED not in out
    again = decode(json.dumps(out), key=KEY)
    entry = next(e for e in again.in_flight if e.task_id == EXECUTING_ID)
    assert {i.call.id: i.dispatched for i in entry.state.pending}[NOTE_CALL] is False


def test_a_default_spelled_with_another_type_is_not_written_back() -> None:
    """Guards ``_spelled_default``'s type check: ``turns: false`` equals ``0`` in Python but is not
    the spelled-out default of ``turns``; our state (0 turns, left out) is what is written."""
    raw = _v4()
    result = _by(raw["completedTaskResults"], "taskId", COMPLETED_ID)["agentResult"]
    result["turns"] = False
    snapshot = decode(json.dumps(raw), key=KEY)
    out = json.loads(encode(snapshot))
    written = _by(out["completedTaskResults"], "taskId", COMPLETED_ID)["agentResult"]
    assert written.get("turns", 0) is not False
    assert "turns" not in written


def test_an_object_without_a_counterpart_in_the_source_gets_nothing_carried() -> None:
    """Guards ``_pairs``' identity match: an in-flight entry of a task the source does not hold
    (one started after the restore) is written from our state alone, never completed with
    another entry's members."""
    raw = _v4()
    raw["inFlightTasks"][0]["contextWindow"] = 200000
    snapshot = decode(json.dumps(raw), key=KEY)
    first, *rest = snapshot.in_flight
    fresh = replace(rest[0], task_id="44444444-5555-4666-8777-888888888888")
    out = json.loads(encode(replace(snapshot, in_flight=(first, fresh))))
    by_id = {e["taskId"]: e for e in out["inFlightTasks"]}
    assert by_id[first.task_id]["contextWindow"] == 200000
    assert "contextWindow" not in by_id[fresh.task_id]


class StopsAtTurn:
    """The scripted model of ``note_team``, which never answers turn ``turn`` (1-based)."""

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.waiting = asyncio.Event()
        self.answer = script(4, 1)

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if sum(m.role == "assistant" for m in messages) >= self.turn - 1:
            self.waiting.set()
            await asyncio.Event().wait()
        return self.answer(messages, options)


def stopping_team(turn: int) -> tuple[Team, StopsAtTurn]:
    model = StopsAtTurn(turn)
    team = note_team(4, 1, "idempotent", lambda ctx: None, agents=("w",))
    return replace(team, agents=[replace(a, adapter=model) for a in team.agents]), model


async def interrupted(
    store: InMemoryStore, path: Path, turn: int, *, durable: bool, restore: bool
) -> None:
    """Run (or restore) run ``r1`` until its model is asked for turn ``turn``; cancel it there."""
    team, model = stopping_team(turn)
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    options = CheckpointOptions(store=store, run_id="r1")
    journaling = JournalOptions(journal, durable=durable)
    runner = OpenMultiAgent()
    if restore:
        call = runner.restore(team, checkpoint=options, journal=journaling)
    else:
        tasks = [Task("task 0", "x", assignee="w", id="t0")]
        call = runner.run_tasks(team, tasks, checkpoint=options, journal=journaling)
    running = asyncio.ensure_future(call)
    try:
        await asyncio.wait_for(model.waiting.wait(), 5)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await journal.close()


async def latest_raw(store: InMemoryStore) -> Raw:
    entry = await store.get(checkpoint_key("r1"))
    assert entry is not None
    value: Raw = json.loads(entry.value)
    return value


async def test_a_journal_first_entry_resaved_in_full_form_drops_messages_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards ``IN_FLIGHT``'s ``messagesFrom``: a journal-first snapshot writes an entry's messages
    once (``messages: []`` with ``messagesFrom``); restored with a journal that is not durable,
    the run saves OMA's full form, which must not carry the source's ``messagesFrom`` beside its
    full ``messages`` (an invalid snapshot, which no restore could read)."""
    monkeypatch.setattr(journal_path, "MIN_TAIL_BYTES", 0)  # compact in the conversation
    store = InMemoryStore()
    journal = tmp_path / "run.jsonl"
    await interrupted(store, journal, 3, durable=True, restore=False)
    [entry] = (await latest_raw(store))["inFlightTasks"]
    assert "messagesFrom" in entry, "the journal-first form, each message once"

    await interrupted(store, journal, 4, durable=False, restore=True)
    raw = await latest_raw(store)
    [entry] = raw["inFlightTasks"]
    assert entry["messages"], "OMA's full form"
    assert "messagesFrom" not in entry
    assert problem(raw) is None

    team = note_team(4, 1, "idempotent", lambda ctx: None, agents=("w",))
    plain = JsonlRunJournal(journal, flush_interval_ms=0)
    try:
        result = await OpenMultiAgent().restore(
            team,
            checkpoint=CheckpointOptions(store=store, run_id="r1"),
            journal=JournalOptions(plain, durable=False),
        )
    finally:
        await plain.close()
    assert result.success

"""The checks of crash matrix 3.5, shared by every crash test, and the counting they rest on.

Each crash test compares the union of its processes' ledgers with an uninterrupted run of the
same scenario (a ``Baseline``): the model calls are the script plus the documented re-asks, no
committed tool call runs again, accounting and identity continue, revisions only grow and events
are at-least-once overall but at most once per process.

The checks hold for both save paths (``Scenario.save``). Journal-first (D10) the snapshot in the
store is the last compaction, so the checks read the state a restore resumes from
(``Scenario.state``: the snapshot with the journal tail folded in), and the revision P1 reached
is the last one it made durable, which a journal-only save does not write into the snapshot.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crash_harness import Child, Scenario
from crash_scenarios import RUN_ID, respond

from oma_actors import TokenUsage
from oma_actors.llm import Message, TextBlock

CallKey = tuple[str, str, str, int]  # (agent, role, task, turn)
UNKNOWN = "TOOL_OUTCOME_UNKNOWN"

# -- counting -----------------------------------------------------------------------------------


def effect_counts(effects: list[dict[str, Any]], phase: str = "effect") -> Counter[str]:
    """How many lines of ``phase`` each tool call id has."""
    return Counter(line["tool_call_id"] for line in effects if line["phase"] == phase)


def call_keys(calls: list[dict[str, Any]]) -> Counter[CallKey]:
    """Model calls as a multiset of ``(agent, role, task, turn)``."""
    return Counter((c["agent"], c["role"], c["task"], c["turn"]) for c in calls)


def in_flight(snapshot: dict[str, Any], title: str = "alpha") -> dict[str, Any] | None:
    """The in-flight entry of the task titled ``title``."""
    ids = {task["title"]: task["id"] for task in snapshot["queue"]["tasks"]}
    for entry in snapshot.get("inFlightTasks") or []:
        if entry["taskId"] == ids.get(title):
            return dict(entry)
    return None


def stored_entry(sc: Scenario, title: str = "alpha") -> dict[str, Any]:
    """The in-flight entry of ``title`` in the stored snapshot itself, without the journal tail.

    Journal-first a task's conversation starts in the journal alone (its admission compacts
    no more, issue 19): until a compaction holds it, the stored snapshot has no entry for it,
    read as an empty one (no turns, no pending calls, no phase).
    """
    snapshot = sc.snapshot()
    assert snapshot is not None
    entry = in_flight(snapshot, title)
    return entry if entry is not None else {"turns": 0, "pendingToolCalls": []}


def committed_calls(entry: dict[str, Any]) -> list[str]:
    """The ids of an entry's pending calls that carry a commit record."""
    calls = entry.get("pendingToolCalls") or []
    return [c["call"]["id"] for c in calls if c.get("commit") is not None]


def dispatched_calls(entry: dict[str, Any]) -> list[str]:
    """The ids of an entry's pending calls marked dispatched."""
    calls = entry.get("pendingToolCalls") or []
    return [c["call"]["id"] for c in calls if c.get("dispatched")]


def assert_compacted(sc: Scenario, state: dict[str, Any]) -> None:
    """Journal-first: the stored snapshot alone is ``state``; the tail adds nothing to it."""
    assert sc.snapshot() == state, "the tail changed the state: the boundary was journal-only"


def completed_titles(snapshot: dict[str, Any]) -> set[str]:
    ids = set(snapshot["queue"]["completed"])
    return {task["title"] for task in snapshot["queue"]["tasks"] if task["id"] in ids}


def of_type(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == name]


def scripted_usage(scenario: str, task: str, turn: int) -> TokenUsage:
    """The token usage the scripted model reports for a worker's ``turn`` of ``task``.

    Asked of ``respond`` itself (the scripted usage depends on the task and turn only), so this
    never drifts from what the children's model returned.
    """
    prompt = [Message("user", [TextBlock(f"# Task: {task}")])]
    return respond(scenario, "worker", task, turn, prompt).usage


# -- baselines ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """An uninterrupted run of a scenario (in its own process)."""

    result: dict[str, Any]
    calls: list[dict[str, Any]]
    effects: list[dict[str, Any]]

    @property
    def call_keys(self) -> Counter[CallKey]:
        return call_keys(self.calls)

    def seen(self, task: str, turn: int) -> list[Any]:
        """The tool results the model was shown at ``task``'s ``turn``."""
        [call] = [c for c in self.calls if c["task"] == task and c["turn"] == turn]
        return list(call["seen"])


GetBaseline = Callable[..., Baseline]
"""The ``baseline`` fixture: ``baseline(scenario, mode="default") -> Baseline``."""


def run_baseline(root: Path, name: str, mode: str) -> Baseline:
    sc = Scenario(root, name, mode)
    child = sc.run()
    assert sc.result()["success"] is True
    return Baseline(sc.result(), sc.model_calls(child.pid), sc.effects(child.pid))


# -- the checks of matrix 3.5 -------------------------------------------------------------------


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result without what legitimately differs between processes (pid, ids, attempt)."""
    tasks = {
        title: {key: value for key, value in task.items() if key != "id"}
        for title, task in result["tasks"].items()
    }
    return {
        "success": result["success"],
        "status": result["status"],
        "tasks": tasks,
        "coordinator": result["coordinator"],
    }


def assert_same_results(
    result: dict[str, Any], baseline: Baseline, *, total_usage: bool = True
) -> None:
    """Statuses, outputs, turns, token usage and tool records equal the uninterrupted run's.

    ``total_usage=False`` skips the run's total token usage (see
    ``test_c09b_restored_team_run_keeps_the_planning_usage`` for why run_team needs it).
    """
    assert comparable(result) == comparable(baseline.result)
    if total_usage:
        assert result["token_usage"] == baseline.result["token_usage"]


def crash_revision(child: Child) -> int | None:
    """The revision of the save a child died right after (``boundary:after``), if it did."""
    found = re.search(r"revision (\d+), durable True\)", child.stderr + child.stdout)
    return int(found.group(1)) if found else None


def last_durable_revision(sc: Scenario, p1: Child, before: dict[str, Any]) -> int:
    """The revision of P1's last durable save.

    With snapshots it is the stored one. Journal-first a journal-only save is durable without
    rewriting the snapshot, so it is the highest of the snapshot's, the revisions P1 reported
    saved and the one of the save it died right after.
    """
    if not sc.journaled:
        return int(before["revision"])
    saved1 = [e["revision"] for e in of_type(sc.events(p1.pid), "CheckpointSaved")]
    return int(max([before["revision"], *saved1, crash_revision(p1) or 0]))


def assert_revisions(sc: Scenario, before: int, after: int, p1: Child, p2: Child) -> None:
    """Revisions only grow: within each process, and P2 continues after P1's last save.

    ``before`` is P1's last durable revision (``last_durable_revision``). With snapshots P2
    continues right after it. Journal-first, P2 continues above every revision P1 could have
    reported from the tail (one per event above the snapshot's watermark), so it may skip some
    but never repeats one.
    """
    assert after > before
    saved1 = [e["revision"] for e in of_type(sc.events(p1.pid), "CheckpointSaved")]
    saved2 = [e["revision"] for e in of_type(sc.events(p2.pid), "CheckpointSaved")]
    assert saved1 == sorted(set(saved1))
    assert saved2 == sorted(set(saved2))
    assert not saved1 or max(saved1) <= before
    assert saved2, "the restoring process saved nothing"
    if sc.journaled:
        assert saved2[0] > before, f"P2 saved {saved2[0]} after P1 made {before} durable"
    else:
        assert saved2[0] == before + 1, f"P2 saved {saved2[0]} after P1 made {before} durable"
    assert max(saved2) <= after


def assert_resumed(
    sc: Scenario,
    p1: Child,
    p2: Child,
    base: Baseline,
    before: dict[str, Any],
    *,
    extra_calls: Counter[CallKey] | None = None,
    same_results: bool = True,
    total_usage: bool = True,
    earlier: tuple[Child, ...] = (),
) -> dict[str, Any]:
    """The checks every crash-and-restore test makes (matrix 3.5, items 2-5 and 8).

    ``before`` is the checkpoint P1 left behind (``Scenario.state``). Returns the one P2 left.
    ``earlier`` are processes of the same run before P1 (say, the one that suspended before a
    reviewer decided): their model calls count in the union too.
    """
    after = sc.state()
    assert after is not None
    result = sc.result()
    calls1, calls2 = sc.model_calls(p1.pid), sc.model_calls(p2.pid)
    calls0 = [call for child in earlier for call in sc.model_calls(child.pid)]

    # 2. Model calls: the union is the script plus the documented re-asks, nothing more.
    union = call_keys(calls0) + call_keys(calls1) + call_keys(calls2)
    assert union == base.call_keys + (extra_calls or Counter())
    # ... and P2 never asks again for a turn whose assistant message was saved.
    for title in completed_titles(before):
        assert not [c for c in calls2 if c["task"] == title], f"{title} completed before the crash"
    for entry_title in {task["title"] for task in before["queue"]["tasks"]}:
        entry = in_flight(before, entry_title)
        if entry is None:
            continue
        asked = [c["turn"] for c in calls2 if c["role"] == "worker" and c["task"] == entry_title]
        final = result["tasks"][entry_title]
        if entry["phase"] == "completed":
            assert asked == [], f"{entry_title} had its final answer saved"
        # P2 asks each turn after the saved ones exactly once, in order, and no other.
        assert asked == list(range(entry["turns"], final["turns"])), (entry_title, asked, entry)

        # 3. Accounting continues from the saved values (it does not restart at 0): the scripted
        # usage is a pure function of (task, turn), so the final usage is exactly the saved
        # usage plus what P2's turns cost.
        spent = [scripted_usage(sc.name, entry_title, turn) for turn in asked]
        assert final["usage"] == [
            entry["tokenUsage"]["input_tokens"] + sum(usage.input_tokens for usage in spent),
            entry["tokenUsage"]["output_tokens"] + sum(usage.output_tokens for usage in spent),
        ], (entry_title, asked, entry)

    # 6. No committed call runs again: P1 published a fresh ToolCalled only once the call's
    # commit was durable (S3 before H), so P2 never enters that call's tool.
    committed = {e["tool_call_id"] for e in of_type(sc.events(p1.pid), "ToolCalled")}
    entered = {e["tool_call_id"] for e in sc.effects(p2.pid) if e["phase"] == "enter"}
    assert not committed & entered, f"committed in P1, run again in P2: {committed & entered}"

    # 4. Identity: same run id, attempt + 1, read by a third party from the store.
    assert before["identity"]["runId"] == after["identity"]["runId"] == RUN_ID
    assert result["run_id"] == RUN_ID
    assert after["identity"]["attempt"] == before["identity"]["attempt"] + 1
    assert result["attempt"] == after["identity"]["attempt"]

    # 8. Events are at-least-once overall and at most once per process.
    for pid in (p1.pid, p2.pid):
        done = Counter(e["task_id"] for e in of_type(sc.events(pid), "TaskCompleted"))
        assert all(count == 1 for count in done.values()), done
    # Tasks the queue had completed before the crash are skipped by the restore without an event
    # (see test_c08_task_completed_event_is_at_least_once for that window).
    finished = {
        e["task_id"] for pid in (p1.pid, p2.pid) for e in of_type(sc.events(pid), "TaskCompleted")
    }
    expected = {t["id"] for t in result["tasks"].values() if t["status"] == "completed"}
    assert expected - set(before["queue"]["completed"]) <= finished <= expected

    if same_results:
        assert_same_results(result, base, total_usage=total_usage)
    assert result["success"] is True

    # 5. Revisions only increase (checked last: a failure here hides none of the above).
    assert_revisions(sc, last_durable_revision(sc, p1, before), after["revision"], p1, p2)
    return after


def replays_only(events: list[dict[str, Any]], call_id: str) -> None:
    """P2 published no fresh ToolCalled for a call whose result was replayed."""
    called = [e for e in of_type(events, "ToolCalled") if e["tool_call_id"] == call_id]
    assert [e["replayed"] for e in called] in ([], [True])


def assert_unknown(sc: Scenario, p2_pid: int, call_id: str) -> None:
    """D1: a dispatched, uncommitted unsafe call is not re-run; the model is told UNKNOWN."""
    assert sc.effects(p2_pid) == []  # no invocation at all in P2
    unknown = of_type(sc.events(p2_pid), "ToolOutcomeUnknown")
    assert [e["tool_call_id"] for e in unknown] == [call_id]
    shown = [c["seen"] for c in sc.model_calls(p2_pid) if c["task"] == "alpha"]
    results = {item[0]: item for seen in shown for item in seen}
    assert results[call_id][2] is True  # is_error
    assert UNKNOWN in results[call_id][1]
    assert UNKNOWN in sc.result()["tasks"]["alpha"]["output"]

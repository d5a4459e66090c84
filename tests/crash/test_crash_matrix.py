"""Crash matrix rows C01-C09, C14, C15 with real processes (crash-matrix.md 3.3).

Each test crashes a child process at one durable boundary (``os._exit(86)`` or SIGKILL), restores
the run in a second process against the same FileStore, and asserts over both processes'
ledgers: tool effects, model calls, accounting, identity, revisions, and equality with an
uninterrupted run of the same scenario.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from crash_child import CHECKPOINT_KEY, CRASH_EXIT, STORE_FILE
from crash_harness import (
    GetBaseline,
    Scenario,
    assert_resumed,
    assert_same_results,
    call_keys,
    effect_counts,
    in_flight,
    of_type,
)

pytestmark = pytest.mark.crash

UNKNOWN = "TOOL_OUTCOME_UNKNOWN"


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


# -- C01 ----------------------------------------------------------------------------------------


def test_c01_crash_before_the_first_save(tmp_path: Path, baseline: GetBaseline) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    sc.run(crash="store:first:before", expect=CRASH_EXIT)
    assert not sc.store_path.exists()  # nothing was written, not even an empty store
    assert sc.effects() == []  # no tool runs before the first durable save
    assert sc.model_calls() == []

    # restore(team) with nothing stored and no tasks is a no-op that writes nothing (D7).
    noop = sc.run(resume=True, no_tasks=True)
    assert sc.result()["tasks"] == {}
    assert sc.model_calls(noop.pid) == []
    assert not sc.store_path.exists()

    # restore(team, tasks) starts a fresh run.
    p2 = sc.run(resume=True)
    result = sc.result()
    assert_same_results(result, base)
    assert result["attempt"] == 1  # a fresh run, not a continuation
    assert sc.snapshot()["identity"]["attempt"] == 1  # type: ignore[index]
    assert call_keys(sc.model_calls(p2.pid)) == base.call_keys  # the first turn is re-run
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    assert of_type(sc.events(p2.pid), "CheckpointSaveFailed") == []


# -- C02 ----------------------------------------------------------------------------------------


def test_c02_assistant_turn_saved_before_tools_run(tmp_path: Path, baseline: GetBaseline) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="store:assistant_saved:after", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    entry = in_flight(before)
    assert entry is not None
    assert entry["phase"] == "executing_tools"
    assert entry["turns"] == 1
    assert sc.effects() == []

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    # The saved assistant turn is replayed: the pending call runs once, with its saved id.
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    assert {e["pid"] for e in sc.effects()} == {p2.pid}
    fresh = [e for e in of_type(sc.events(p2.pid), "ToolCalled") if not e["replayed"]]
    assert [e["tool_call_id"] for e in fresh] == ["alpha-t0-A"]


# -- C03 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "unsafe"])
def test_c03a_crash_in_tool_before_its_effect(
    tmp_path: Path, baseline: GetBaseline, mode: str
) -> None:
    base = baseline("chain", mode)
    sc = Scenario(tmp_path, "chain", mode)
    p1 = sc.run(crash="tool:before_effect", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    [pending] = in_flight(before)["pendingToolCalls"]  # type: ignore[index]
    assert "commit" not in pending
    assert pending.get("dispatched", False) is (mode == "unsafe")
    assert effect_counts(sc.effects(p1.pid)) == {}

    p2 = sc.run(resume=True)
    if mode == "default":
        assert_resumed(sc, p1, p2, base, before)
        assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
        assert effect_counts(sc.effects(p2.pid), "enter") == {"alpha-t0-A": 1}  # same id
    else:
        assert_resumed(sc, p1, p2, base, before, same_results=False)
        assert_unknown(sc, p2.pid, "alpha-t0-A")
        assert effect_counts(sc.effects()) == {}


@pytest.mark.parametrize(("mode", "effects"), [("default", 2), ("idempotent", 1), ("unsafe", 1)])
def test_c03b_crash_in_tool_after_its_effect(
    tmp_path: Path, baseline: GetBaseline, mode: str, effects: int
) -> None:
    base = baseline("chain", mode)
    sc = Scenario(tmp_path, "chain", mode)
    p1 = sc.run(crash="tool:after_effect", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}

    p2 = sc.run(resume=True)
    # Default tools: the documented window, pinned at 2 so any change is deliberate.
    assert effect_counts(sc.effects()) == {"alpha-t0-A": effects}
    assert len({e["key"] for e in sc.effects()}) == 1  # one idempotency key across both runs
    if mode == "unsafe":
        assert_resumed(sc, p1, p2, base, before, same_results=False)
        assert_unknown(sc, p2.pid, "alpha-t0-A")
    else:
        assert_resumed(sc, p1, p2, base, before)
        dedupes = effect_counts(sc.effects(p2.pid), "dedupe")
        assert dedupes == ({"alpha-t0-A": 1} if mode == "idempotent" else {})


@pytest.mark.parametrize(("mode", "effects"), [("default", 2), ("unsafe", 1)])
def test_c03c_tool_returned_commit_not_landed(
    tmp_path: Path, baseline: GetBaseline, mode: str, effects: int
) -> None:
    base = baseline("chain", mode)
    sc = Scenario(tmp_path, "chain", mode)
    p1 = sc.run(crash="store:commit:before", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    assert "commit" not in in_flight(before)["pendingToolCalls"][0]  # type: ignore[index]
    assert effect_counts(sc.effects(p1.pid), "return") == {"alpha-t0-A": 1}

    p2 = sc.run(resume=True)
    assert effect_counts(sc.effects()) == {"alpha-t0-A": effects}
    if mode == "unsafe":
        assert_resumed(sc, p1, p2, base, before, same_results=False)
        assert_unknown(sc, p2.pid, "alpha-t0-A")
    else:
        assert_resumed(sc, p1, p2, base, before)


def test_c03c_tool_after_return_exit(tmp_path: Path, baseline: GetBaseline) -> None:
    """The tool returns and the process dies on the next loop turn, before the commit lands."""
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="tool:after_return", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    assert "commit" not in in_flight(before)["pendingToolCalls"][0]  # type: ignore[index]
    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 2}


def test_c03b_sigkill_after_effect(tmp_path: Path, baseline: GetBaseline) -> None:
    """M-kill: SIGKILL while the tool blocks after its effect gives the same outcome as M-exit."""
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run_until_ready_then_kill(crash="kill:tool_after_effect")
    before = sc.snapshot()
    assert before is not None
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}
    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 2}


# -- C04 ----------------------------------------------------------------------------------------


def test_c04_all_calls_committed_before_the_results_message(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("witherror")
    sc = Scenario(tmp_path, "witherror")
    p1 = sc.run(crash="store:all_committed:after", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    entry = in_flight(before)
    assert entry is not None
    assert entry["turns"] == 1
    errors = [c["commit"]["result"].get("is_error", False) for c in entry["pendingToolCalls"]]
    assert errors == [False, True]  # the error result is committed like any other

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert sc.effects(p2.pid) == []  # nothing re-runs
    assert effect_counts(sc.effects(p1.pid), "enter") == {"alpha-t0-P": 1, "alpha-t0-boom": 1}
    # Every result replayed verbatim, error included, in the original call order.
    [turn1] = [c for c in sc.model_calls(p2.pid) if c["task"] == "alpha"]
    assert turn1["turn"] == 1
    assert turn1["seen"] == base.seen("alpha", 1)
    assert [item[0] for item in turn1["seen"]] == ["alpha-t0-P", "alpha-t0-boom"]
    for call_id in ("alpha-t0-P", "alpha-t0-boom"):
        replays_only(sc.events(p2.pid), call_id)
    assert sc.result()["tasks"]["alpha"]["turns"] == 2  # turns went up exactly once


# -- C05 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "gate", "q_effects"),
    [
        ("default", "q_before_effect", 1),
        ("default", "q_after_effect", 2),
        ("unsafe", "q_after_effect", 1),
    ],
)
def test_c05_between_sibling_commits(
    tmp_path: Path, baseline: GetBaseline, mode: str, gate: str, q_effects: int
) -> None:
    base = baseline("parallel", mode)
    sc = Scenario(tmp_path, "parallel", mode)
    p1 = sc.run(crash="store:p_not_q:after", gate=gate, expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    committed = [("commit" in c) for c in in_flight(before)["pendingToolCalls"]]  # type: ignore[index]
    assert committed == [True, False]
    p1_effects = effect_counts(sc.effects(p1.pid))
    assert p1_effects["alpha-t0-P"] == 1
    assert p1_effects["alpha-t0-Q"] == (1 if gate == "q_after_effect" else 0)

    p2 = sc.run(resume=True)
    effects = effect_counts(sc.effects())
    assert effects == {"alpha-t0-P": 1, "alpha-t0-Q": q_effects}
    assert "alpha-t0-P" not in effect_counts(sc.effects(p2.pid), "enter")  # P never twice
    replays_only(sc.events(p2.pid), "alpha-t0-P")
    [turn1] = [c for c in sc.model_calls(p2.pid) if c["task"] == "alpha"]
    assert [item[0] for item in turn1["seen"]] == ["alpha-t0-P", "alpha-t0-Q"]  # model order
    if mode == "unsafe":
        assert_resumed(sc, p1, p2, base, before, same_results=False)
        assert [e["tool_call_id"] for e in of_type(sc.events(p2.pid), "ToolOutcomeUnknown")] == [
            "alpha-t0-Q"
        ]
        assert UNKNOWN in turn1["seen"][1][1]
        assert turn1["seen"][1][2] is True
        assert turn1["seen"][0] == base.seen("alpha", 1)[0]
    else:
        assert_resumed(sc, p1, p2, base, before)
        assert turn1["seen"] == base.seen("alpha", 1)


# -- C06 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["sigkill", "exit_half_temp"])
def test_c06_filestore_write_stopped_before_the_rename(
    tmp_path: Path, baseline: GetBaseline, how: str
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    if how == "sigkill":
        p1 = sc.run_until_ready_then_kill(crash="kill:replace_commit")
    else:
        p1 = sc.run(crash="exit:replace_commit", expect=CRASH_EXIT)
    temps = sorted(sc.state_dir.glob(f"{STORE_FILE}.tmp-{p1.pid}-*"))
    assert len(temps) == 1, temps
    orphan = temps[0].read_bytes()  # read first: opening a FileStore sweeps dead writers' temps
    # The temp holds the lost write (the commit); the target is the previous revision and parses.
    lost = json.loads(orphan)
    [lost_entry] = [e for e in lost["entries"] if e["key"] == CHECKPOINT_KEY]
    lost_snapshot = json.loads(lost_entry["value"])
    assert "commit" in in_flight(lost_snapshot)["pendingToolCalls"][0]  # type: ignore[index]
    json.loads(sc.store_path.read_bytes())
    before = sc.snapshot()
    assert before is not None
    assert before["revision"] == lost_snapshot["revision"] - 1
    assert "commit" not in in_flight(before)["pendingToolCalls"][0]  # type: ignore[index]
    # Put the orphan back for P2 (whole, or torn in half): P2 must never read it.
    temps[0].write_bytes(orphan if how == "sigkill" else orphan[: len(orphan) // 2])

    p2 = sc.run(resume=True)
    # The lost commit behaves as C03c: the default tool runs again.
    assert_resumed(sc, p1, p2, base, before)
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 2}
    assert not temps[0].exists()  # the orphan temp of the dead writer was swept (D5)


# -- C07 / C08 ----------------------------------------------------------------------------------


def test_c07a_task_completed_saved_queue_not_yet(tmp_path: Path, baseline: GetBaseline) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="store:alpha_completed:after", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    assert in_flight(before)["phase"] == "completed"  # type: ignore[index]
    assert "alpha" not in before["queue"]["completed"]

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert [c for c in sc.model_calls(p2.pid) if c["task"] == "alpha"] == []
    assert sc.effects(p2.pid) == []
    assert [c["turn"] for c in sc.model_calls() if c["task"] == "beta"] == [0]  # dependent once


def test_c07b_final_response_received_completion_not_saved(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="store:alpha_completed:before", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    entry = in_flight(before)
    assert entry is not None
    assert entry["phase"] == "awaiting_model"
    assert entry["turns"] == 1

    p2 = sc.run(resume=True)
    # Exactly one extra model call: the last turn of alpha is asked again. No tool re-runs.
    assert_resumed(
        sc, p1, p2, base, before, extra_calls=Counter({("worker", "worker", "alpha", 1): 1})
    )
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    assert sc.effects(p2.pid) == []


def test_c08_completed_task_saved_dependents_not_dispatched(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="store:alpha_in_queue:after", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    assert before["queue"]["completed"] == ["alpha"]
    assert before["inFlightTasks"] == []

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    started = [e["task_id"] for e in of_type(sc.events(p2.pid), "TaskStarted")]
    assert started == ["beta"]
    assert [c["task"] for c in sc.model_calls(p2.pid)] == ["beta"]
    assert sc.effects(p2.pid) == []
    # beta's answer digests its dependency context: it got alpha's checkpointed result.
    assert sc.result()["tasks"]["beta"]["output"] == base.result["tasks"]["beta"]["output"]


def test_c08_task_completed_event_is_at_least_once(tmp_path: Path) -> None:
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="store:alpha_in_queue:after", expect=CRASH_EXIT)
    p2 = sc.run(resume=True)
    completed = [
        e["task_id"] for pid in (p1.pid, p2.pid) for e in of_type(sc.events(pid), "TaskCompleted")
    ]
    assert "alpha" in completed


# -- C09 ----------------------------------------------------------------------------------------


def test_c09a_crash_during_synthesis(tmp_path: Path, baseline: GetBaseline) -> None:
    base = baseline("team")
    sc = Scenario(tmp_path, "team")
    p1 = sc.run(crash="model:synthesis", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    assert before["mode"] == "runTeam"
    assert sorted(before["queue"]["completed"]) == sorted(t["id"] for t in before["queue"]["tasks"])
    assert "synthesisResult" not in before

    p2 = sc.run(resume=True)
    assert_resumed(
        sc,
        p1,
        p2,
        base,
        before,
        extra_calls=Counter({("coordinator", "coordinator", "synthesis", 0): 1}),
        total_usage=False,
    )
    calls2 = sc.model_calls(p2.pid)
    assert [(c["role"], c["task"]) for c in calls2] == [("coordinator", "synthesis")]
    assert sc.effects(p2.pid) == []
    assert sc.result()["coordinator"] == base.result["coordinator"]
    assert of_type(sc.events(p2.pid), "SynthesisFailed") == []

    # A later restore of the finished run returns the stored synthesis without any call (D4).
    p3 = sc.run(resume=True)
    assert sc.model_calls(p3.pid) == []
    assert sc.effects(p3.pid) == []
    assert sc.result()["coordinator"] == base.result["coordinator"]


def test_c09b_crash_after_the_admission_snapshot_does_not_replan(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("team")
    sc = Scenario(tmp_path, "team")
    p1 = sc.run(crash="store:first:after", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    assert [t["title"] for t in before["queue"]["tasks"]] == ["alpha", "beta"]  # the plan (D3)
    assert [(c["role"], c["task"]) for c in sc.model_calls(p1.pid)] == [("coordinator", "plan")]
    assert sc.effects() == []  # no task effect before the plan was durable

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before, total_usage=False)
    assert [c for c in sc.model_calls() if c["task"] == "plan"] == sc.model_calls(p1.pid)[:1]
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}


def test_c09b_restored_team_run_keeps_the_planning_usage(
    tmp_path: Path, baseline: GetBaseline
) -> None:
    base = baseline("team")
    sc = Scenario(tmp_path, "team")
    sc.run(crash="store:first:after", expect=CRASH_EXIT)
    sc.run(resume=True)
    assert sc.result()["token_usage"] == base.result["token_usage"]


def test_c09_restoring_a_finished_team_run_twice_makes_no_calls(tmp_path: Path) -> None:
    sc = Scenario(tmp_path, "team")
    sc.run()
    assert "synthesisResult" in sc.snapshot()  # type: ignore[operator]
    first = sc.run(resume=True)
    assert sc.model_calls(first.pid) == []
    assert "synthesisResult" in sc.snapshot()  # type: ignore[operator]  # fails here today
    second = sc.run(resume=True)
    assert "synthesisResult" in sc.snapshot()  # type: ignore[operator]
    assert sc.model_calls(second.pid) == []  # matrix 3.5 item 7, DESIGN D4


# -- C14 / C15 ----------------------------------------------------------------------------------


def test_c14_crash_during_restore_then_restore_again(tmp_path: Path, baseline: GetBaseline) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="store:assistant_saved:after", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    stored = sc.store_path.read_bytes()

    # P2 dies on its first write: nothing of it is durable, and it did no work before.
    p2 = sc.run(resume=True, crash="store:first:before", expect=CRASH_EXIT)
    assert sc.store_path.read_bytes() == stored
    assert sc.model_calls(p2.pid) == []
    assert sc.effects(p2.pid) == []

    # P3 gives the same result as restoring straight from P1's snapshot.
    p3 = sc.run(resume=True)
    assert_resumed(sc, p1, p3, base, before)
    assert sc.result()["attempt"] == 2  # P2's attempt was never persisted, so it is reused
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    final = sc.result()

    # Restoring the final checkpoint again does no work (matrix 3.5 item 7).
    p4 = sc.run(resume=True)
    assert sc.model_calls(p4.pid) == []
    assert sc.effects(p4.pid) == []
    assert_same_results(sc.result(), base)
    assert sc.result()["attempt"] == final["attempt"] + 1


def test_c15_result_hook_exits_after_the_commit(tmp_path: Path, baseline: GetBaseline) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="hook:tool_called", expect=CRASH_EXIT)
    before = sc.snapshot()
    assert before is not None
    # ToolCalled is published strictly after the commit save (S3 before H).
    assert "commit" in in_flight(before)["pendingToolCalls"][0]  # type: ignore[index]
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert sc.effects(p2.pid) == []  # the tool is not re-run
    replays_only(sc.events(p2.pid), "alpha-t0-A")  # and the hook sees no fresh call

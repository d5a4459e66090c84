"""Crash matrix rows C06-C09, C14 and C15 with real processes (crash-matrix.md 3.3).

The rows past the tool calls: the FileStore's write, a task's end, the run's end (synthesis,
planning) and a crash during restore.

Like ``test_crash_matrix.py``: crash a child at one point, restore in a second process, assert
over both processes' ledgers. Every point is a durable boundary of the run (``crash_at``) except
C06 (inside FileStore's atomic write: a row about the store's bytes), C09a (inside the synthesis
model call) and C15 (inside the ``on_progress`` hook).

Every row runs with both save paths (``save``), as in ``test_crash_matrix.py``. Journal-first a
task's end, the synthesis and the admission are compaction points (``assert_compacted``); C06,
C07b and C15 die with state in the tail only (``stored_entry`` lacks what P2 does not redo).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from crash_checks import (
    GetBaseline,
    assert_compacted,
    assert_resumed,
    assert_same_results,
    committed_calls,
    effect_counts,
    in_flight,
    of_type,
    replays_only,
    stored_entry,
)
from crash_harness import FILE_SAVES, Scenario, folded_state
from crash_scenarios import CHECKPOINT_KEY, STORE_FILE

from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash


# -- C06 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("save", FILE_SAVES)  # a row about a FileStore's bytes
@pytest.mark.parametrize("how", ["sigkill", "exit_half_temp"])
def test_c06_filestore_write_stopped_before_the_rename(
    tmp_path: Path, save: str, baseline: GetBaseline, how: str
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
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
    json.loads(sc.store_path.read_bytes())
    stored = sc.snapshot()
    assert stored is not None
    if sc.journaled:
        # Journal-first the commit and the final answer were journal appends (D14), so the first
        # snapshot write holding alpha's result is its completion's compaction; the target is
        # the compaction before it (alpha's first turn, no commit) and the tail holds the
        # commit, the results message and the final answer.
        tasks = {task["title"]: task for task in lost_snapshot["queue"]["tasks"]}
        assert tasks["alpha"]["status"] == "completed"
        assert in_flight(lost_snapshot) is None
        assert stored["revision"] < lost_snapshot["revision"]
        assert committed_calls(stored_entry(sc)) == []
    else:
        assert "commit" in in_flight(lost_snapshot)["pendingToolCalls"][0]  # type: ignore[index]
        assert stored["revision"] == lost_snapshot["revision"] - 1
        assert "commit" not in in_flight(stored)["pendingToolCalls"][0]  # type: ignore[index]
    folded = sc.fold()  # what P2 restores from (asserted below, after P2 ran)
    # Put the orphan back for P2 (whole, or torn in half): P2 must never read it.
    temps[0].write_bytes(orphan if how == "sigkill" else orphan[: len(orphan) // 2])

    p2 = sc.run(resume=True)
    assert not temps[0].exists()  # the orphan temp of the dead writer was swept (D5)
    if not sc.journaled:
        # The lost commit behaves as C03c: the default tool runs again.
        assert_resumed(sc, p1, p2, base, stored)
        assert effect_counts(sc.effects()) == {"alpha-t0-A": 2}
        return
    # Journal-first the lost write's own row is C07b: the commit in the tail is replayed (the
    # tool never runs again) and alpha's final answer is folded (D14): alpha's last turn is not
    # asked again; the tail is never discarded.
    discarded = [e["reason"] for e in of_type(sc.events(p2.pid), "JournalTailDiscarded")]
    assert (discarded, effect_counts(sc.effects())) == ([], {"alpha-t0-A": 1})
    before = folded_state(folded)
    assert before is not None
    assert_resumed(sc, p1, p2, base, before)


# -- C07 / C08 ----------------------------------------------------------------------------------


def test_c07a_task_completed_saved_queue_not_yet(
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run(crash="terminal:after@alpha", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    if sc.journaled:
        # A final answer is folded (D14): the terminal is a journal save, the stored snapshot
        # is from before the answer and the tail alone completes alpha.
        assert stored_entry(sc).get("phase") != "completed"
    assert in_flight(before)["phase"] == "completed"  # type: ignore[index]
    assert "alpha" not in before["queue"]["completed"]

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert [c for c in sc.model_calls(p2.pid) if c["task"] == "alpha"] == []
    assert sc.effects(p2.pid) == []
    assert [c["turn"] for c in sc.model_calls() if c["task"] == "beta"] == [0]  # dependent once


def test_c07b_final_response_received_completion_not_saved(
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run(crash="terminal:before@alpha", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    if sc.journaled:  # the commit and the results message are in the tail only
        assert committed_calls(stored_entry(sc)) == []
        assert stored_entry(sc).get("phase") in (None, "executing_tools")
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
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run(crash="task_completed:after@alpha", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    if sc.journaled:
        assert_compacted(sc, before)  # a task's completion compacts
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


def test_c08_task_completed_event_is_at_least_once(tmp_path: Path, save: str) -> None:
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run(crash="task_completed:after@alpha", expect=CRASH_EXIT)
    p2 = sc.run(resume=True)
    completed = [
        e["task_id"] for pid in (p1.pid, p2.pid) for e in of_type(sc.events(pid), "TaskCompleted")
    ]
    assert "alpha" in completed


# -- C09 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "crash",
    [
        "model:synthesis",  # inside the synthesis model call (the row as written)
        "synthesis:before",  # the synthesis was answered, its save never started
    ],
)
def test_c09a_crash_during_synthesis(
    tmp_path: Path, save: str, baseline: GetBaseline, crash: str
) -> None:
    base = baseline("team")
    sc = Scenario(tmp_path, "team", save=save)
    p1 = sc.run(crash=crash, expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    if sc.journaled:
        assert_compacted(sc, before)  # every task's completion compacted
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
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("team")
    sc = Scenario(tmp_path, "team", save=save)
    p1 = sc.run(crash="admission:after", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    if sc.journaled:
        assert_compacted(sc, before)  # the admission (the plan) is a compaction
    assert [t["title"] for t in before["queue"]["tasks"]] == ["alpha", "beta"]  # the plan (D3)
    assert [(c["role"], c["task"]) for c in sc.model_calls(p1.pid)] == [("coordinator", "plan")]
    assert sc.effects() == []  # no task effect before the plan was durable

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before, total_usage=False)
    assert [c for c in sc.model_calls() if c["task"] == "plan"] == sc.model_calls(p1.pid)[:1]
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}


def test_c09b_restored_team_run_keeps_the_planning_usage(
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("team")
    sc = Scenario(tmp_path, "team", save=save)
    sc.run(crash="admission:after", expect=CRASH_EXIT)
    sc.run(resume=True)
    assert sc.result()["token_usage"] == base.result["token_usage"]


def test_c09_restoring_a_finished_team_run_twice_makes_no_calls(tmp_path: Path, save: str) -> None:
    sc = Scenario(tmp_path, "team", save=save)
    sc.run()
    assert "synthesisResult" in sc.snapshot()  # type: ignore[operator]
    first = sc.run(resume=True)
    assert sc.model_calls(first.pid) == []
    assert "synthesisResult" in sc.snapshot()  # type: ignore[operator]  # fails here today
    second = sc.run(resume=True)
    assert "synthesisResult" in sc.snapshot()  # type: ignore[operator]
    assert sc.model_calls(second.pid) == []  # matrix 3.5 item 7, DESIGN D4


# -- C14 / C15 ----------------------------------------------------------------------------------


def test_c14_crash_during_restore_then_restore_again(
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run(crash="assistant_tool_turn:after@alpha", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    stored, journal = sc.dump()

    # P2 dies at its first boundary (its admission save): nothing of it is durable, and it did
    # no work before.
    p2 = sc.run(resume=True, crash="admission:before", expect=CRASH_EXIT)
    assert sc.dump() == (stored, journal)  # neither of its store nor of its journal
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


def test_c15_result_hook_exits_after_the_commit(
    tmp_path: Path, save: str, baseline: GetBaseline
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=save)
    p1 = sc.run(crash="hook:tool_called", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    # ToolCalled is published strictly after the commit save (S3 before H).
    assert "commit" in in_flight(before)["pendingToolCalls"][0]  # type: ignore[index]
    if sc.journaled:  # the commit is in the tail only; P2 below does not re-run the tool
        assert committed_calls(stored_entry(sc)) == []
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}

    p2 = sc.run(resume=True)
    assert_resumed(sc, p1, p2, base, before)
    assert sc.effects(p2.pid) == []  # the tool is not re-run
    replays_only(sc.events(p2.pid), "alpha-t0-A")  # and the hook sees no fresh call

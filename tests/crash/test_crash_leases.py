"""Crash matrix C13a-d with real processes: one owner per run, leases and fencing tokens.

Every worker is a separate process (``lease_child.py``) on one SQLite database, whose
compare-and-set and ``apply`` are atomic across processes; the run record, the fence and every
snapshot live in that one store. The lease clock is a file the parent writes (``lease_harness``),
so a lease expires exactly when a test moves time past it. What landed is read from the
database's audit table, which triggers fill in the same transaction as each write, whichever
process made it; effects and model calls come from the append-only ledgers the workers write.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from crash_scenarios import RUN_ID
from lease_child import REFUSED_EXIT, TOOL_HOLD, TOOL_PAUSE
from lease_harness import T0, TTL, Finished, Worker, World, iso

from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash

COMMITTED = "tool_commit:after@alpha"  # P1 dies once A's commit record is durable
CALL_A = "alpha-t0-A"
RACE_ROUNDS = 20  # ten create races and ten takeover races


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A fresh database, ledgers and lease clock; kills any worker a failing test left running."""
    w = World(tmp_path)
    yield w
    w.close()


def lease_of(world: World) -> tuple[str, int, int, str | None]:
    """``(status, fencingToken, attempt, lease owner)`` of the stored run record."""
    record = world.record()
    assert record is not None
    lease = record.get("lease") or {}
    return record["status"], record["fencingToken"], record["attempt"], lease.get("owner")


def lease_expires(world: World, at: str) -> bool:
    """Whether the run record's lease now expires at ``at``."""
    return world.expires() == at


def effects_of(world: World, *phases: str) -> list[tuple[str, str, str, int | None]]:
    """``(owner, phase, label, token)`` of every effect-ledger line in ``phases``."""
    return [
        (e["owner"], e["phase"], e["label"], e["token"])
        for e in world.effects()
        if e["phase"] in phases
    ]


def crash_holder(world: World, *options: str) -> Finished:
    """P1 starts the run and dies (M-exit) once A's commit is durable; it still holds the lease."""
    p1 = world.run("p1", "--crash", COMMITTED, *options, expect=CRASH_EXIT)
    assert f"crash_at: os._exit({CRASH_EXIT}) at {COMMITTED} (" in p1.stderr
    assert lease_of(world) == ("running", 1, 1, "p1")
    return p1


def assert_refused_without_work(world: World, refused: Finished, before: dict[str, str]) -> None:
    """A worker was refused P1's lease: no model call, no tool call, no write at all."""
    assert refused.answer["error"] == "RUN_LEASE_HELD", refused
    assert "leased by 'p1'" in refused.answer["message"]  # it read P1's record
    assert world.model_calls(refused.pid) == []
    assert world.effects(refused.pid) == []
    assert world.dump() == before


def assert_all_snapshots_from(
    world: World, since: int, owner: str, token: int, *, attempt: int | None = None
) -> None:
    """Every snapshot written after audit row ``since`` was fenced by ``owner`` with ``token``.

    Each snapshot's ``identity.attempt`` must be ``attempt`` (default: ``token``; in these runs
    the owner with token N restores attempt N; ``0`` skips the check).
    """
    writes = world.snapshot_writes(since)
    assert writes, "no snapshot was written"
    for write in writes:
        fence = write["fenced_by"]
        assert fence is not None, f"snapshot revision {write['revision']} was not fenced"
        assert (fence["owner"], fence["token"]) == (owner, token), write
        if attempt != 0:
            assert write["attempt"] == (token if attempt is None else attempt), write


def result_of(done: Finished) -> dict[str, Any]:
    """The run's result as the worker printed it."""
    assert "status" in done.answer, done
    return done.answer


# -- C13a: the lease holder crashes ---------------------------------------------------------------


def test_c13a_crashed_holder_blocks_until_its_lease_expires_then_a_takeover_resumes(
    world: World,
) -> None:
    p1 = crash_holder(world)
    assert effects_of(world, "effect") == [("p1", "effect", "A", 1)]  # tools saw token 1
    record = world.record()
    assert record is not None
    assert record["lease"]["expiresAt"] == iso(T0 + TTL) == "2025-06-15T15:06:50.000Z"

    world.advance(TTL / 2)  # before T: P1's lease is still live although P1 is dead
    before, mark = world.dump(), world.last_audit()
    p2 = world.run("p2", "--resume", expect=REFUSED_EXIT)
    assert_refused_without_work(world, p2, before)

    world.advance(TTL)  # past T
    p3 = world.run("p3", "--resume")
    result = result_of(p3)
    assert (result["status"], result["attempt"]) == ("ok", 2)
    assert lease_of(world) == ("completed", 2, 2, None)
    # A's commit was durable: it is replayed, never run again (the only effect is P1's).
    assert effects_of(world, "enter", "effect") == [
        ("p1", "enter", "A", 1),
        ("p1", "effect", "A", 1),
    ]
    assert result["tasks"]["alpha"]["tool_calls"] == [["ledger", f"ok:A:{CALL_A}"]]
    # P3 resumed after the commit: the model is shown A's result and is not asked again for it.
    calls = world.model_calls(p3.pid)
    assert [(c["task"], c["turn"]) for c in calls] == [("alpha", 1), ("beta", 0)]
    assert calls[0]["seen"] == [[CALL_A, f"ok:A:{CALL_A}", False]]
    assert [(c["task"], c["turn"]) for c in world.model_calls(p1.pid)] == [("alpha", 0)]
    assert_all_snapshots_from(world, mark, "p3", 2)
    snapshot = world.snapshot()
    assert snapshot is not None
    assert snapshot["identity"]["attempt"] == 2


# -- C13b: the holder stalls, a peer takes over, the holder wakes ----------------------------------


def stall_and_take_over(world: World, pause: str, *options: str) -> tuple[Worker, Finished, int]:
    """P1 runs to ``pause`` and is SIGSTOPped past T; P2 takes the run over and finishes it.

    Returns P1 (still stopped, blocked at the pause), P2 and the audit row before P2 started.
    """
    p1 = world.spawn("p1", "--pause", pause, *options)
    p1.wait_ready(pause)
    world.stop(p1)  # M-stop: no heartbeat, no write, while the lease runs out
    world.advance(TTL + 1)
    mark = world.last_audit()
    assert_all_snapshots_from(world, 0, "p1", 1)
    p2 = world.run("p2", "--resume", *options)
    result = result_of(p2)
    assert (result["status"], result["attempt"]) == ("ok", 2)
    assert lease_of(world) == ("completed", 2, 2, None)
    assert_all_snapshots_from(world, mark, "p2", 2)
    return p1, p2, mark


def wake(world: World, p1: Worker) -> tuple[Finished, dict[str, Any]]:
    """SIGCONT P1 and let it go on from its pause; returns it finished and its result."""
    world.cont(p1)
    p1.release()
    done = p1.finish()
    result = result_of(done)
    assert result["status"] == "aborted", result
    assert "RUN_LEASE_LOST" in (result["status_message"] or "")
    lost = [e for e in world.events(done.pid) if e["type"] == "LeaseLost"]
    assert len(lost) == 1
    return done, result


def test_c13b_stalled_holder_wakes_fenced_out_and_dispatches_no_unsafe_tool(world: World) -> None:
    pause = "tool_dispatch:before@alpha"  # P1 is about to make A's dispatch record durable
    p1, p2, _ = stall_and_take_over(world, pause, "--tool-mode", "unsafe")
    calls_before_wake = len(world.model_calls(p1.pid))
    after_p2, audit_p2 = world.dump(), world.last_audit()

    done, _ = wake(world, p1)
    # P1's next save was its dispatch record: refused by the fence, so nothing of P1 landed,
    # not even a run-record write, and the strict boundary stopped the unsafe tool.
    failed = [e for e in world.events(done.pid) if e["type"] == "CheckpointSaveFailed"]
    assert [(e["boundary"], e["strict"]) for e in failed] == [("tool_dispatch", True)]
    assert world.dump() == after_p2
    assert world.last_audit() == audit_p2
    assert world.effects(done.pid) == []
    assert len(world.model_calls(done.pid)) == calls_before_wake
    # The unsafe call ran once, in P2, which passed its token 2 to the external system.
    assert effects_of(world, "enter", "effect", "refused") == [
        ("p2", "enter", "A", 2),
        ("p2", "effect", "A", 2),
    ]
    assert result_of(p2)["tasks"]["alpha"]["status"] == "completed"


def test_c13b_stale_holders_in_flight_effect_is_refused_by_the_external_system(
    world: World,
) -> None:
    p1, _, _ = stall_and_take_over(world, TOOL_PAUSE)  # P1 stalls inside A, before its effect
    after_p2, audit_p2 = world.dump(), world.last_audit()

    done, _ = wake(world, p1)
    # P2 re-ran A (no commit record) with token 2; P1's effect, already in flight with token 1,
    # reaches the external system afterwards and is refused there.
    assert effects_of(world, "enter", "effect", "refused") == [
        ("p1", "enter", "A", 1),
        ("p2", "enter", "A", 2),
        ("p2", "effect", "A", 2),
        ("p1", "refused", "A", 1),
    ]
    assert world.dump() == after_p2  # and P1's commit of that call never landed
    assert world.last_audit() == audit_p2
    assert [e["tool_call_id"] for e in world.effects(done.pid)] == [CALL_A, CALL_A]


def test_c13b_live_holders_heartbeat_keeps_its_lease_until_it_stalls_then_learns_of_the_loss(
    world: World,
) -> None:
    ttl = 1.0  # the heartbeat renews every third of a second of real time
    p1 = world.spawn("p1", "--pause", TOOL_HOLD, ttl=ttl)  # P1 waits inside A, loop running
    p1.wait_ready(TOOL_HOLD)
    for _ in range(3):  # 2.4 s of lease clock in all: well past P1's first lease
        world.advance(0.8 * ttl)
        renewed = iso(world.now() + ttl)
        world.wait_for(partial(lease_expires, world, renewed), f"P1's renewal to {renewed}")
    mark = world.last_audit()
    p2 = world.run("p2", "--resume", ttl=ttl, expect=REFUSED_EXIT)
    assert p2.answer["error"] == "RUN_LEASE_HELD", p2
    assert world.model_calls(p2.pid) == []
    assert world.effects(p2.pid) == []
    assert {(w["owner"], w["token"]) for w in world.record_writes(mark)} <= {("p1", 1)}
    assert world.snapshot_writes(mark) == []

    world.stop(p1)  # now the heartbeat cannot renew: the lease runs out
    world.advance(2 * ttl)
    p3 = world.run("p3", "--resume", ttl=ttl)
    assert result_of(p3)["status"] == "ok"
    assert lease_of(world) == ("completed", 2, 2, None)
    after, audit_p3 = world.dump(), world.last_audit()

    world.cont(p1)  # its next renewal finds token 2 on the record: P1 stops, still in A
    world.wait_for(
        lambda: any(e["type"] == "LeaseLost" for e in world.events(p1.pid)), "P1's LeaseLost"
    )
    done = p1.finish()  # closes stdin, ending the thread A was waiting in
    result = result_of(done)
    assert result["status"] == "aborted"
    assert "RUN_LEASE_LOST" in (result["status_message"] or "")
    assert world.dump() == after
    assert world.last_audit() == audit_p3
    effects = effects_of(world, "enter", "effect", "refused")
    assert effects[:3] == [
        ("p1", "enter", "A", 1),
        ("p3", "enter", "A", 2),
        ("p3", "effect", "A", 2),
    ]
    # A's worker thread outlives the cancelled run: once stdin closes it may still try its
    # effect before the process exits, and the external system refuses the stale token. What
    # must never appear is an effect of P1's.
    assert effects[3:] in ([], [("p1", "refused", "A", 1)])


# -- C13c: crash during the lease acquisition ------------------------------------------------------


@pytest.mark.parametrize("when", ["after", "before"])
def test_c13c_crash_around_the_acquire(world: World, when: str) -> None:
    p1 = world.run("p1", "--crash-acquire", when, expect=CRASH_EXIT)
    assert f"CrashingStore: os._exit(86) {when} compare_and_set __oma_run__/{RUN_ID}" in p1.stderr
    assert world.model_calls(p1.pid) == []
    assert world.effects(p1.pid) == []
    assert world.snapshot() is None

    if when == "before":  # the acquisition never landed: the next worker takes the run at once
        assert world.record() is None
        p2 = world.run("p2", "--resume")
        assert result_of(p2)["status"] == "ok"
        assert lease_of(world) == ("completed", 1, 1, None)
        assert effects_of(world, "effect") == [("p2", "effect", "A", 1)]
        return

    # It landed, though P1 never heard so: P2 must read the record and respect the lease.
    assert lease_of(world) == ("running", 1, 1, "p1")
    world.advance(TTL / 2)
    before = world.dump()
    p2 = world.run("p2", "--resume", expect=REFUSED_EXIT)
    assert_refused_without_work(world, p2, before)
    world.advance(TTL)
    mark = world.last_audit()
    p3 = world.run("p3", "--resume")
    assert result_of(p3)["status"] == "ok"
    assert lease_of(world) == ("completed", 2, 2, None)
    assert effects_of(world, "effect") == [("p3", "effect", "A", 2)]
    # No checkpoint existed, so P3 ran the tasks afresh: its snapshots say attempt 1 while the
    # record and the result say 2 (reported to the lead; not pinned here either way).
    assert_all_snapshots_from(world, mark, "p3", 2, attempt=0)


# -- C13d: two fresh restorers at once, and the three-process acquire race -------------------------


def test_c13d_two_restorers_started_together_exactly_one_acquires(world: World) -> None:
    crash_holder(world)
    world.advance(TTL + 1)  # P1's lease has run out: both restorers may try
    before, mark = world.dump(), world.last_audit()
    pause = "admission:before"  # a restorer's first save: the winner holds here
    restorers = [world.spawn(name, "--resume", "--go", "--pause", pause) for name in ("p2", "p3")]
    for worker in restorers:
        worker.wait_ready("go")
    for worker in restorers:
        worker.release()
    first = {worker.name: worker.next_line() or "" for worker in restorers}
    winners = [w for w in restorers if first[w.name].startswith(f"READY {pause}")]
    assert len(winners) == 1, first
    winner = winners[0]
    loser = next(w for w in restorers if w is not winner)
    refused = loser.finish(expect=REFUSED_EXIT)
    assert refused.answer["error"] == "RUN_LEASE_HELD", refused
    # The only write since the race is the winner's acquisition (while it holds at its pause).
    assert [(w["owner"], w["token"]) for w in world.record_writes(mark)] == [(winner.name, 2)]
    assert world.snapshot_writes(mark) == []
    assert {k: v for k, v in world.dump().items() if "__oma_run__" not in k} == {
        k: v for k, v in before.items() if "__oma_run__" not in k
    }

    winner.release()
    assert result_of(winner.finish())["status"] == "ok"
    assert lease_of(world) == ("completed", 2, 2, None)
    assert_all_snapshots_from(world, mark, winner.name, 2)
    assert world.effects(refused.pid) == []
    assert world.model_calls(refused.pid) == []


def test_three_processes_race_to_acquire_one_run_one_winner_every_round(world: World) -> None:
    racers = [world.spawn(f"r{i}", mode="race") for i in range(3)]
    for racer in racers:
        racer.wait_ready("race")
    contended = 0
    for round_no in range(RACE_ROUNDS):
        # Even rounds race to create a new run's record; odd rounds race to take over the
        # previous round's run once its winner's lease has run out.
        takeover = round_no % 2 == 1
        run_id = f"race-{round_no - takeover}"
        if takeover:
            world.advance(TTL + 1)
        mark = world.last_audit()
        start = time.time() + 0.05
        for racer in racers:
            racer.send(f"go {run_id} {start!r}")
        answers = [json.loads(racer.next_line() or "{}") for racer in racers]
        winners = [a for a in answers if "token" in a]
        assert len(winners) == 1, (round_no, answers)
        expected = 2 if takeover else 1  # a takeover moves the token and the attempt by one
        assert (winners[0]["token"], winners[0]["attempt"]) == (expected, expected), answers
        assert sorted(a.get("error", "won") for a in answers) == [
            "RUN_LEASE_HELD",
            "RUN_LEASE_HELD",
            "won",
        ], answers
        writes = world.record_writes(mark, run_id)
        assert [(w["owner"], w["token"]) for w in writes] == [(winners[0]["owner"], expected)]
        contended += any(a["swaps_lost"] for a in answers)
    for racer in racers:
        racer.finish()
    # Some rounds must really have raced past the lease check into the compare-and-set.
    assert contended >= 1, "no round was contended"

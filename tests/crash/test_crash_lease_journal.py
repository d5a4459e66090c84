"""C13a and C13b with the journal in the database (D15): a takeover replays the tail; a stalled
holder's events never land.

Every row runs on SQLite and on PostgreSQL (``world``), the run's store, record and journal in
one database, each worker journal-first under a lease.

- C13a: P1 dies once a tool commit is durable (a fenced append); a peer is refused until the
  lease expires, then takes over and replays the commit from the journal.
- C13b: P1 stops just before an unsafe tool's dispatch boundary; the parent SIGSTOPs it (M-stop)
  and moves the lease clock past its lease. P2 takes the run over (attempt 2) and finishes it.
  When P1 wakes, every event it still had to append (the held events of its turn, the dispatch
  record, ``run/end``) is a fenced append: refused in the same transaction as the record check,
  so the journal table holds not one event of P1 written after the takeover, and the unsafe
  tool ran once, in P2.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lease_child import REFUSED_EXIT
from lease_harness import TTL, World
from lease_pg_harness import PgWorld

from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash

PAUSE = "tool_dispatch:before@alpha"
COMMITTED = "tool_commit:after@alpha"  # P1 dies once A's commit record is durable


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    """The run's database: a SQLite file, or a fresh table of the test PostgreSQL."""
    if request.param == "sqlite":
        w = World(tmp_path)
        yield w
        w.close()
        return
    pg = PgWorld(tmp_path, str(request.getfixturevalue("postgres_dsn")))
    try:
        yield pg
    finally:
        pg.close()
        pg.drop()


def test_c13a_on_a_database_journal_a_crashed_holder_blocks_until_expiry_then_the_tail_replays(
    world: World,
) -> None:
    # P1 dies (M-exit) once A's commit is durable: journal-first, a fenced append in the
    # database only. Before its lease expires P2 is refused and writes nothing; after it, P3
    # takes over (attempt 2): A's commit is folded from the journal and replayed, never run again.
    p1 = world.run("p1", "--crash", COMMITTED, "--journal", expect=CRASH_EXIT)
    assert f"crash_at: os._exit({CRASH_EXIT}) at {COMMITTED} (" in p1.stderr
    record = world.record()
    assert record is not None
    assert (record["status"], record["attempt"], record["lease"]["owner"]) == ("running", 1, "p1")
    rows = world.journal_rows()
    assert ("tool/result", 1) in {(kind, attempt) for _, attempt, kind in rows}

    world.advance(TTL / 2)  # P1's lease is still live although P1 is dead
    p2 = world.run("p2", "--resume", "--journal", expect=REFUSED_EXIT)
    assert p2.answer["error"] == "RUN_LEASE_HELD", p2
    assert (world.model_calls(p2.pid), world.effects(p2.pid)) == ([], [])
    assert world.journal_rows() == rows  # refused before any append

    world.advance(TTL)
    p3 = world.run("p3", "--resume", "--journal")
    assert (p3.answer["status"], p3.answer["attempt"]) == ("ok", 2)
    ran = [(e["owner"], e["phase"], e["label"]) for e in world.effects() if e["phase"] != "replay"]
    assert [entry for entry in ran if entry[1] in ("enter", "effect")] == [
        ("p1", "enter", "A"),
        ("p1", "effect", "A"),
    ]
    assert [(c["task"], c["turn"]) for c in world.model_calls(p3.pid)] == [
        ("alpha", 1),
        ("beta", 0),
    ]
    final = world.journal_rows()
    assert final[: len(rows)] == rows  # P1's events kept; P3's continue above them
    assert [seq for seq, _, _ in final] == list(range(final[0][0], final[0][0] + len(final)))
    assert {attempt for _, attempt, _ in final[len(rows) :]} == {2}
    assert final[-1][2] == "run/end"


def test_c13b_on_a_database_journal_a_stalled_holder_lands_no_event_after_the_takeover(
    world: World,
) -> None:
    options = ("--tool-mode", "unsafe", "--journal")
    p1 = world.spawn("p1", "--pause", PAUSE, *options)
    p1.wait_ready(PAUSE)
    world.stop(p1)  # M-stop: no heartbeat, no append, while the lease runs out
    world.advance(TTL + 1)
    before_takeover = world.journal_rows()
    assert before_takeover
    assert {attempt for _, attempt, _ in before_takeover} == {1}

    p2 = world.run("p2", "--resume", *options)
    assert (p2.answer["status"], p2.answer["attempt"]) == ("ok", 2)
    saved = [e for e in world.events(p2.pid) if e["type"] == "CheckpointSaved"]
    assert "journal" in {e["mode"] for e in saved}  # the leased run is journal-first
    after_p2 = world.journal_rows()

    world.cont(p1)
    p1.release()
    done = p1.finish()
    assert done.answer["status"] == "aborted", done
    assert "RUN_LEASE_LOST" in (done.answer["status_message"] or "")

    final = world.journal_rows()
    stale = [row for row in final if row[1] == 1 and row not in before_takeover]
    assert stale == []  # 0 events of the old owner after the takeover
    assert final == after_p2
    assert [seq for seq, _, _ in final] == sorted({seq for seq, _, _ in final})
    assert any(kind == "run/end" and attempt == 2 for _, attempt, kind in final)
    # The unsafe call ran once, in P2.
    effects = [(e["owner"], e["phase"]) for e in world.effects() if e["phase"] == "effect"]
    assert effects == [("p2", "effect")]


def test_a_leased_restore_without_journal_opens_the_database_journal(world: World) -> None:
    # P1 dies (M-exit) once the unsafe call of alpha is dispatched: its dispatch record is a
    # fenced journal append, in the database only. P2 restores WITHOUT a journal argument: the
    # snapshot's journalRef names the journal in the store's own database, the restore opens it
    # and finds the dispatch, so the call is never run again (D15). Restored without that
    # journal, P2 would run alpha's unsafe call a second time.
    options = ("--tool-mode", "unsafe")
    p1 = world.spawn("p1", "--crash", "tool_dispatch:after@alpha", *options, "--journal")
    p1.finish(expect=86)
    dispatched = [kind for _, attempt, kind in world.journal_rows() if attempt == 1]
    assert "tool/call" in dispatched
    world.advance(TTL + 1)

    p2 = world.run("p2", "--resume", *options)  # no --journal: it comes from journalRef
    assert p2.answer["attempt"] == 2
    rows = world.journal_rows()
    assert any(attempt == 2 for _, attempt, _ in rows)  # P2 journaled into the same table
    [(tool, output)] = p2.answer["tasks"]["alpha"]["tool_calls"]
    assert (tool, output.split(":")[0]) == ("ledger", "TOOL_OUTCOME_UNKNOWN")
    entered = [e for e in world.effects() if e["phase"] in ("enter", "effect")]
    assert entered == []  # dispatched before the crash: outcome unknown, never run again

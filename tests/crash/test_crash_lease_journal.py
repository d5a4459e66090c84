"""C13b with the journal in the database (D15): a stalled holder's events never land.

Every row runs on SQLite and on PostgreSQL (``world``). P1 runs the chain scenario journal-first
on a store whose journal lives in the same database,
under a lease, and stops just before an unsafe tool's dispatch boundary; the parent SIGSTOPs it
(M-stop) and moves the lease clock past its lease. P2 takes the run over (attempt 2) and
finishes it, journal-first too. When P1 wakes, every event it still had to append (the held
events of its turn, the dispatch record, ``run/end``) is a fenced append: refused in the same
transaction as the record check, so the journal table holds not one event of P1 written after
the takeover, and the unsafe tool ran once, in P2.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lease_harness import TTL, World
from lease_pg_harness import PgWorld

pytestmark = pytest.mark.crash

PAUSE = "tool_dispatch:before@alpha"


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

"""Journal-first crash rows (decision D10): C02 from the tail, C12a and C12b (crash-matrix.md 3.3).

Every process here runs with ``--journal``: a durable JSONL journal (``flush_interval_ms=0``),
and for the rows that take ``journal_save`` also the journal in the store's own SQLite or
PostgreSQL database (D15; a torn line is a JSONL matter, so C12a's torn rows stay on files). The
rows shared with the snapshot save path run in both modes in
``test_crash_matrix.py`` and ``test_crash_tasks.py``; these are the ones about the journal itself:

- C02 (tail): a task's *second* tool round, whose assistant turn is a journal-only save (the
  first boundary of a task compacts), so the tail alone carries it.
- C12a: a torn trailing line counts as not written (no warning); a complete event that fails the
  fold checks makes the restore refuse (``JournalDamagedError``, decision D15: journal-first, the
  tail is saved state), or with ``on_damaged_journal="salvage"`` fold the sound part before it
  (``JournalTailDiscarded``) without re-running any call the tail shows as started.
- C12b: the journal holds a ``tool/result`` the snapshot lacks: restored with the journal, the
  tool is not run again. Seqs continue past P1's last one.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from crash_checks import (
    GetBaseline,
    assert_resumed,
    assert_unknown,
    committed_calls,
    effect_counts,
    in_flight,
    of_type,
    replays_only,
    stored_entry,
)
from crash_child import REFUSED_EXIT
from crash_harness import DATABASE_SAVES, Child, Scenario

from oma_actors.journal.fold import Discarded
from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash


def discards(sc: Scenario, pid: int) -> list[str]:
    """The reasons of the ``JournalTailDiscarded`` events process ``pid`` published."""
    return [e["reason"] for e in of_type(sc.events(pid), "JournalTailDiscarded")]


def lost_crash_save(child: Child) -> Child:
    """``child`` as if the save it died right after had never been made durable.

    For the revision check (``last_durable_revision``): the parent cut that save's line off, or
    the restore discards the tail holding it, so the run resumes from before it.
    """
    return replace(child, stderr=child.stderr.replace(", durable True)", ", durable lost)"))


def assert_journal_continues(sc: Scenario, p1_lines: int, *, attempt: int = 2) -> None:
    """Every line parses; the restore's events come after P1's, seqs strictly past all of them."""
    lines = sc.journal_lines()
    old, new = lines[:p1_lines], lines[p1_lines:]
    assert new, "the restoring process appended nothing to the journal"
    seqs = [line["seq"] for line in new]
    assert seqs == sorted(set(seqs))
    assert seqs[0] > max(line["seq"] for line in old)
    assert {line["attempt"] for line in new} == {attempt}
    if not sc.in_database:
        assert sc.journal_path.read_bytes().endswith(b"\n")  # no torn line left behind


# -- C02 from the tail ------------------------------------------------------------------------


def test_c02_second_assistant_turn_restored_from_the_tail(
    tmp_path: Path, baseline: GetBaseline, journal_save: str
) -> None:
    base = baseline("rounds")
    sc = Scenario(tmp_path, "rounds", save=journal_save)
    p1 = sc.run(crash="assistant_tool_turn:after:2@alpha", expect=CRASH_EXIT)
    before = sc.state()
    assert before is not None
    entry = in_flight(before)
    assert entry is not None
    assert (entry["phase"], entry["turns"]) == ("executing_tools", 2)
    # The snapshot was not rewritten at that boundary: it still ends at the first round...
    assert stored_entry(sc)["turns"] < 2
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}

    p2 = sc.run(resume=True)
    # ... yet P2 does not ask the model for that turn again: the tail carried it.
    assert [c["turn"] for c in sc.model_calls(p2.pid) if c["task"] == "alpha"] == [2]
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1, "alpha-t1-B": 1}
    assert effect_counts(sc.effects(p2.pid), "enter") == {"alpha-t1-B": 1}
    replays_only(sc.events(p2.pid), "alpha-t0-A")
    assert_resumed(sc, p1, p2, base, before)


# -- C12a -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["child_tear", "parent_cut"])
@pytest.mark.parametrize(("mode", "effects"), [("default", 2), ("unsafe", 1)])
def test_c12a_torn_last_line_is_not_written(
    tmp_path: Path, baseline: GetBaseline, how: str, mode: str, effects: int
) -> None:
    base = baseline("chain", mode)
    sc = Scenario(tmp_path, "chain", mode, save="journal")
    if how == "child_tear":
        # The child writes half of the tool/result line, then os._exit.
        p1 = sc.run(crash="journal:torn_result", expect=CRASH_EXIT)
        assert "torn journal line: tool/result" in p1.stderr
    else:
        # The result's line landed whole; the parent cuts its last half off.
        p1 = sc.run(crash="tool_commit:after@alpha", expect=CRASH_EXIT)
        data = sc.journal_path.read_bytes()
        last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        assert json.loads(last)["type"] == "tool/result"
        sc.journal_path.write_bytes(data[: len(data) - len(last) // 2 - 1])
        p1 = lost_crash_save(p1)
    data = sc.journal_path.read_bytes()
    assert not data.endswith(b"\n")
    with pytest.raises(json.JSONDecodeError):
        json.loads(data.rsplit(b"\n", 1)[-1])  # the trailing line does not parse
    complete = len(sc.journal_lines())
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}
    before = sc.state()  # a torn line never reaches the fold: the tail folds without it
    assert before is not None
    assert committed_calls(in_flight(before) or {}) == []

    p2 = sc.run(resume=True)
    assert discards(sc, p2.pid) == []  # a torn line is not a discarded tail: no warning
    # The result never became durable, so the row is C03c's: a default tool runs again; an
    # unsafe one (its dispatch record is a complete line) is UNKNOWN and never run again.
    assert effect_counts(sc.effects()) == {"alpha-t0-A": effects}
    if mode == "unsafe":
        assert_unknown(sc, p2.pid, "alpha-t0-A")
    assert [c["turn"] for c in sc.model_calls(p2.pid) if c["task"] == "alpha"] == [1]
    assert_journal_continues(sc, complete)  # the first append cut the torn bytes off
    assert_resumed(sc, p1, p2, base, before, same_results=mode == "default")


BAD_EVENTS = pytest.mark.parametrize(
    ("bad", "journal_save"),
    # A database journal keys its rows by (run_id, seq): no line can repeat there.
    [(bad, "journal") for bad in ("duplicate_line", "result_twice")]
    + [("result_twice", kind) for kind in DATABASE_SAVES],
    indirect=["journal_save"],
)


def with_bad_event(sc: Scenario, bad: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """P1 dies right after alpha's commit; then one complete bad event goes into the journal.

    duplicate_line: the same event again, its seq does not increase (a JSONL journal only: a
    database journal's key is ``(run_id, seq)``); result_twice: a second result, with a fresh seq,
    for a call the tail already committed.
    """
    sc.run(crash="tool_commit:after@alpha", expect=CRASH_EXIT)
    lines = sc.journal_lines()
    result = lines[-1]
    assert result["type"] == "tool/result"
    extra = dict(result) if bad == "duplicate_line" else {**result, "seq": result["seq"] + 1}
    sc.add_journal_line(extra)
    assert isinstance(sc.fold(), Discarded)
    assert committed_calls(stored_entry(sc)) == []  # the commit is in the tail only
    return lines, extra


@BAD_EVENTS
def test_c12a_complete_bad_event_in_a_journal_first_tail_refuses_the_restore(
    tmp_path: Path, bad: str, journal_save: str
) -> None:
    # D15: journal-first, the tail is saved state; discarding it (OMA's rule, D6) would run the
    # committed call again. The restore refuses, names the bad event and writes nothing.
    sc = Scenario(tmp_path, "chain", save=journal_save)
    _, extra = with_bad_event(sc, bad)
    stored = sc.dump()
    p2 = sc.run(resume=True, expect=REFUSED_EXIT)
    outcome = sc.result()
    assert outcome["error"] == "JournalDamagedError"
    assert f"at seq {extra['seq']}" in outcome["message"]
    assert sc.dump() == stored
    assert sc.effects(p2.pid) == []
    assert sc.model_calls(p2.pid) == []


@BAD_EVENTS
def test_c12a_complete_bad_event_salvaged_reruns_nothing(
    tmp_path: Path, baseline: GetBaseline, bad: str, journal_save: str
) -> None:
    base = baseline("chain")
    sc = Scenario(tmp_path, "chain", save=journal_save, on_damaged="salvage")
    lines, extra = with_bad_event(sc, bad)
    p1 = sc.children[-1]
    p2 = sc.run(resume=True)
    reasons = discards(sc, p2.pid)
    assert len(reasons) == 1, reasons
    assert f"seq {extra['seq']}" in reasons[0]
    # Salvage folds the sound part before the bad event: the commit replays, nothing re-runs.
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    replays_only(sc.events(p2.pid), "alpha-t0-A")
    assert [c["turn"] for c in sc.model_calls(p2.pid) if c["task"] == "alpha"] == [1]
    assert_journal_continues(sc, len(lines) + 1)  # the bad event is kept, for audit
    assert sc.journal_lines()[len(lines)] == extra
    assert sc.result()["tasks"]["alpha"]["status"] == base.result["tasks"]["alpha"]["status"]
    assert p1.returncode == CRASH_EXIT

    # The salvage is not sticky: the finished run's snapshot covers the bad event.
    p3 = sc.run(resume=True)
    assert discards(sc, p3.pid) == []
    assert sc.model_calls(p3.pid) == []
    assert sc.effects(p3.pid) == []


# -- C12b -----------------------------------------------------------------------------------------


def test_c12b_tail_result_restored_with_the_journal(
    tmp_path: Path, baseline: GetBaseline, journal_save: str
) -> None:
    # Without the journal the snapshot alone would run the default tool again (JR-18, OMA's
    # mode); a journal-first snapshot never restores without it (D15): it opens the journal it
    # names or refuses (test_crash_journal_ref.py).
    base = baseline("chain")
    sc = Scenario(tmp_path / "with", "chain", save=journal_save)
    p1 = sc.run(crash="tool_commit:after@alpha", expect=CRASH_EXIT)
    lines = sc.journal_lines()
    assert [(x["type"], x.get("toolCallId")) for x in lines[-1:]] == [("tool/result", "alpha-t0-A")]
    assert committed_calls(stored_entry(sc)) == []  # the snapshot has no commit
    before = sc.state()
    assert before is not None
    assert committed_calls(in_flight(before) or {}) == ["alpha-t0-A"]

    # With the journal: the result is folded in, the tool is not run again.
    p2 = sc.run(resume=True)
    assert sc.effects(p2.pid) == []
    assert discards(sc, p2.pid) == []
    replays_only(sc.events(p2.pid), "alpha-t0-A")
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    assert_journal_continues(sc, len(lines))  # seq continues strictly past P1's last one
    assert_resumed(sc, p1, p2, base, before)

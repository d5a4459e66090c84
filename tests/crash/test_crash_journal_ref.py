"""A journal-first snapshot never restores without its journal (decision D15), killed processes.

P1 saves journal-first (a durable JSONL journal) and is SIGKILLed inside an ``unsafe`` tool,
after its effect (the card is charged): the call's dispatch record is a journal-only save, the
snapshot in the store does not have it. P2 restores WITHOUT ``--journal``:

- the journal the snapshot names (``journalRef``) is there: P2 opens it, the call is not run
  again (the model is told ``TOOL_OUTCOME_UNKNOWN``: one charge on the effects ledger, not two),
  and P2's snapshots still name the journal;
- it is gone: P2 refuses with ``JournalUnavailableError`` before any write (the store file is
  byte-identical, no model call, no tool call).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crash_checks import assert_unknown, effect_counts
from crash_child import REFUSED_EXIT
from crash_harness import Scenario

pytestmark = pytest.mark.crash


def crashed_after_dispatch(tmp_path: Path) -> Scenario:
    sc = Scenario(tmp_path, "chain", "unsafe", save="journal")
    p1 = sc.run_until_ready_then_kill(crash="kill:tool_after_effect")
    assert "alpha-t0-A" in sc.started_calls()  # the dispatch record is in the tail only
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}  # the card was charged
    snapshot = sc.snapshot()
    assert snapshot is not None
    # The admission (a new task's conversation is journal-only, issue 19): no event of the run
    # was in the journal before it, so it names no ``through`` yet.
    ref = {key: value for key, value in snapshot["journalRef"].items() if key != "through"}
    assert ref == {"kind": "JsonlRunJournal", "path": str(sc.journal_path), "durable": True}
    return sc


def test_restore_without_journal_opens_the_journal_the_snapshot_names(tmp_path: Path) -> None:
    sc = crashed_after_dispatch(tmp_path)
    p2 = sc.run(resume=True, journal=False)
    # Without D15 this restore resumed from the snapshot alone and charged the card again.
    assert effect_counts(sc.effects())["alpha-t0-A"] == 1
    assert_unknown(sc, p2.pid, "alpha-t0-A")
    final = sc.snapshot()
    assert final is not None
    assert final["journalRef"]["path"] == str(sc.journal_path)  # the re-save keeps it
    attempts = {line["attempt"] for line in sc.journal_lines()}
    assert attempts == {1, 2}  # P2 journaled into the file it opened


def test_restore_without_journal_refuses_when_it_is_gone(tmp_path: Path) -> None:
    sc = crashed_after_dispatch(tmp_path)
    sc.journal_path.unlink()
    before = sc.store_path.read_bytes()
    p2 = sc.run(resume=True, journal=False, expect=REFUSED_EXIT)
    result = json.loads((sc.ledger_dir / "result.json").read_text())
    assert result["error"] == "JournalUnavailableError"
    assert str(sc.journal_path) in result["message"]
    assert sc.store_path.read_bytes() == before  # nothing written, not even a lease or attempt
    assert sc.effects(p2.pid) == []
    assert sc.model_calls(p2.pid) == []
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}

"""A new task's first unsafe dispatch, journal-only, then a hostile tail edit: never re-run (#19).

A task's admission no longer compacts (its conversation is new): P1 runs the ``chain``
scenario journal-first with the ``unsafe`` ledger tool and dies inside the tool, after its
effect. The stored snapshot is the run's admission: alpha's conversation, its call and the
call's dispatch record are in the journal alone. The journal is then damaged at or before that
dispatch, so the tail a restore folds no longer holds alpha's conversation: refused by default
(``JournalDamagedError``, nothing written), and salvaged, alpha fails closed with
``TOOL_OUTCOME_UNKNOWN`` instead of asking the model again for the call that ran (its effect
stays at 1 on the external ledger).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from crash_checks import effect_counts
from crash_child import REFUSED_EXIT
from crash_harness import CHILD_TIMEOUT, ROOT, Child, Scenario

from oma_actors.testing.crash_points import CRASH_EXIT

pytestmark = pytest.mark.crash

CALL = "alpha-t0-A"


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def prompt_index(lines: list[bytes]) -> int:
    """The line of alpha's prompt (``user/message`` of origin ``input``)."""
    for index, line in enumerate(lines):
        event = json.loads(line)
        if event["type"] == "user/message" and event.get("taskId") == "alpha":
            return index
    raise AssertionError("no prompt of alpha in the journal")


def duplicate_prompt(path: Path) -> None:
    lines = lines_of(path)
    at = prompt_index(lines)
    path.write_bytes(b"".join([*lines[: at + 1], lines[at], *lines[at + 1 :]]))


def swap_prompt(path: Path) -> None:
    lines = lines_of(path)
    at = prompt_index(lines)
    lines[at], lines[at + 1] = lines[at + 1], lines[at]
    path.write_bytes(b"".join(lines))


def cut_at_prompt(path: Path) -> None:
    lines = lines_of(path)
    path.write_bytes(b"".join(lines[: prompt_index(lines)]))


EDITS: dict[str, Callable[[Path], None]] = {
    "duplicate_the_prompt": duplicate_prompt,
    "swap_the_prompt": swap_prompt,
    "cut_the_journal_at_the_prompt": cut_at_prompt,
}


@pytest.mark.parametrize("on_damaged", ["refuse", "salvage"])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_new_tasks_dispatched_call_never_reruns_after_a_hostile_edit(
    tmp_path: Path, edit: str, on_damaged: str
) -> None:
    sc = Scenario(tmp_path, "chain", "unsafe", save="journal", on_damaged=on_damaged)
    p1 = sc.run(crash="tool:after_effect", expect=CRASH_EXIT)
    assert effect_counts(sc.effects(p1.pid)) == {CALL: 1}
    stored = sc.snapshot()
    assert stored is not None
    # The new task's admission was journal-only: no snapshot holds its conversation.
    assert not stored.get("inFlightTasks"), stored.get("inFlightTasks")
    assert CALL in sc.started_calls()

    EDITS[edit](sc.journal_path)
    store, journal = sc.store_path.read_bytes(), sc.journal_path.read_bytes()
    p2 = restore(sc)

    assert effect_counts(sc.effects()) == {CALL: 1}, "the dispatched call never ran again"
    if on_damaged == "refuse":
        assert p2.returncode == REFUSED_EXIT
        assert sc.result()["error"] == "JournalDamagedError"
        assert (sc.store_path.read_bytes(), sc.journal_path.read_bytes()) == (store, journal)
        assert sc.model_calls(p2.pid) == []
        return
    assert p2.returncode == 0, p2.stderr
    unknown = [e for e in sc.events(p2.pid) if e["type"] == "ToolOutcomeUnknown"]
    assert [e["tool_call_id"] for e in unknown] == [CALL], unknown
    alpha = sc.result()["tasks"]["alpha"]
    assert (alpha["status"], alpha["success"]) == ("failed", False)
    assert alpha["output"].startswith("TOOL_OUTCOME_UNKNOWN"), alpha
    # alpha is not asked again: no model call of its own in P2.
    assert [c for c in sc.model_calls(p2.pid) if c["task"] == "alpha"] == []


def restore(sc: Scenario) -> Child:
    """P2: restore without ``--journal`` (the snapshot names it); it finishes or refuses."""
    proc = subprocess.Popen(
        sc.command(resume=True, journal=False), cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    stdout, stderr = proc.communicate(timeout=CHILD_TIMEOUT)
    assert proc.returncode in (0, REFUSED_EXIT), stderr
    child = Child(proc.pid, proc.returncode, stdout, stderr)
    sc.children.append(child)
    return child

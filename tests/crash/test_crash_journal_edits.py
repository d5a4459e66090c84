"""Hostile edits of a journal-first run's JSONL: 0 re-runs of a call that ran (decision D15).

P1 runs the ``parallel`` scenario with ``unsafe`` tools, journal-first, and dies (``os._exit``)
right after P's commit record became durable while Q, dispatched, had already made its effect:
the tail holds P committed and Q dispatched, and the snapshot holds neither. The journal is then
edited as an attacker (or a careless operator) would, and P2 restores, refusing a damaged tail
(the default) or salvaging it. Whatever the edit, each of P and Q has made its effect exactly
once on the external ledger: the restore either refuses with a typed error (and writes nothing)
or goes on without running either again. ``OUTCOMES`` pins which, per edit.

A garbage line in the run's tail cannot be read past, salvage or not (``JournalCorruptError``);
one below the tail (before the snapshot's watermark) is not read at all (a restore seeks to its tail,
issue 19 item 4; ``oma verify`` reads every line and reports it), like another run's line. A
truncation that cuts off only events above the last compaction is seen through the dispatch
marks beside the journal (``<journal>.marks``, issue 18): each unsafe dispatch wrote one, naming
a seq the cut journal no longer reaches.
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

RAN = ("alpha-t0-P", "alpha-t0-Q")  # P committed (tail only), Q dispatched with its effect made


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def tail_index(lines: list[bytes], kind: str, call_id: str) -> int:
    """The line of the ``kind`` event (tool/call or tool/result) of ``call_id``."""
    for index, line in enumerate(lines):
        event = json.loads(line)
        if event["type"] != kind:
            continue
        found = event["call"]["id"] if kind == "tool/call" else event["toolCallId"]
        if found == call_id:
            return index
    raise AssertionError(f"no {kind} of {call_id}")


def duplicate(path: Path) -> None:
    lines = lines_of(path)
    at = tail_index(lines, "tool/call", "alpha-t0-Q")
    path.write_bytes(b"".join([*lines[: at + 1], lines[at], *lines[at + 1 :]]))


def swap(path: Path) -> None:
    lines = lines_of(path)
    at = tail_index(lines, "tool/result", "alpha-t0-P")
    lines[at - 1], lines[at] = lines[at], lines[at - 1]
    path.write_bytes(b"".join(lines))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def delete(path: Path) -> None:
    path.unlink()


def foreign(path: Path) -> None:
    lines = lines_of(path)
    at = tail_index(lines, "tool/call", "alpha-t0-Q")
    other = {**json.loads(lines[at]), "runId": "someone-else", "seq": 1}
    path.write_bytes(b"".join([*lines[:at], (json.dumps(other) + "\n").encode(), *lines[at:]]))


def garbage(path: Path) -> None:
    # Below the tail: after the run's first line, before the admission's watermark (the tail
    # now starts there: a new task's conversation is journal-only, issue 19).
    lines = lines_of(path)
    path.write_bytes(b"".join([*lines[:1], b"\x00{not json at all\n", *lines[1:]]))


def garbage_in_tail(path: Path) -> None:
    lines = lines_of(path)
    at = tail_index(lines, "tool/call", "alpha-t0-Q")
    path.write_bytes(b"".join([*lines[:at], b"\x00{not json at all\n", *lines[at:]]))


EDITS: dict[str, Callable[[Path], None]] = {
    "duplicate_line": duplicate,
    "swap_two_lines": swap,
    "truncate_mid_file": truncate,
    "empty_the_file": empty,
    "delete_the_file": delete,
    "foreign_run_line": foreign,
    "garbage_line_below_the_tail": garbage,
    "garbage_line_in_the_tail": garbage_in_tail,
}


@pytest.mark.parametrize("on_damaged", ["refuse", "salvage"])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_hostile_edit_never_reruns_a_call_that_ran(
    tmp_path: Path, edit: str, on_damaged: str
) -> None:
    sc = Scenario(tmp_path, "parallel", "unsafe", save="journal", on_damaged=on_damaged)
    p1 = sc.run(crash="tool_commit:after@alpha", gate="q_after_effect", expect=CRASH_EXIT)
    assert effect_counts(sc.effects(p1.pid)) == dict.fromkeys(RAN, 1)
    assert {"alpha-t0-P", "alpha-t0-Q"} <= sc.started_calls()  # both in the tail only

    EDITS[edit](sc.journal_path)
    store = sc.store_path.read_bytes()
    journal = sc.journal_path.read_bytes() if sc.journal_path.exists() else None
    p2 = restore(sc)
    counts = effect_counts(sc.effects())
    assert [counts[call] for call in RAN] == [1, 1], counts  # 0 re-runs, refused or restored
    if p2.returncode == REFUSED_EXIT:
        # A refusal is typed and leaves the store and the journal as they were.
        assert sc.result()["error"] in {
            "JournalUnavailableError", "JournalDamagedError", "JournalCorruptError",
        }  # fmt: skip
        assert sc.store_path.read_bytes() == store
        now = sc.journal_path.read_bytes() if sc.journal_path.exists() else None
        assert now == journal
        assert sc.model_calls(p2.pid) == []
    assert sc.result().get("error", "restored") == OUTCOMES[edit][on_damaged == "salvage"]


# What each edit leads to: (refused with / restored) by default, and with salvage.
OUTCOMES = {
    "delete_the_file": ("JournalUnavailableError", "JournalUnavailableError"),
    "duplicate_line": ("JournalDamagedError", "restored"),
    "empty_the_file": ("JournalDamagedError", "restored"),
    "foreign_run_line": ("restored", "restored"),  # another run's events are not this tail
    # Below the tail the restore reads (it seeks): not this tail, as another run's line.
    "garbage_line_below_the_tail": ("restored", "restored"),
    "garbage_line_in_the_tail": ("JournalCorruptError", "JournalCorruptError"),
    "swap_two_lines": ("JournalDamagedError", "restored"),
    # Cut above the last compaction: the dispatch marks beside the journal say what it held.
    "truncate_mid_file": ("JournalDamagedError", "restored"),
}


def restore(sc: Scenario) -> Child:
    """P2: restore without ``--journal`` (the snapshot names it); it finishes or refuses."""
    cmd = sc.command(resume=True, journal=False)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    stdout, stderr = proc.communicate(timeout=CHILD_TIMEOUT)
    assert proc.returncode in (0, REFUSED_EXIT), stderr
    child = Child(proc.pid, proc.returncode, stdout, stderr)
    sc.children.append(child)
    return child

"""``verify_run`` and ``oma verify`` follow a fork's child's links into its parent (decision D17).

A fork's child continues in its parent's journal with seqs above the fork point, and its
conversation up to that point is its parent's: its links (``sourceEventSeqs``, a request
block's lineage) cite the parent's events. Told which runs are forks (``forks``, from the
snapshots' ``forkedFrom``), the verifier resolves such a link among the parent's events at or
below the fork point; a link the parent does not resolve there stays reported.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from history_support import Effects, Workspace, make_team, restore_run, run_journal_first, tasks

from oma_actors import CheckpointOptions, JournalOptions, OpenMultiAgent, open_store
from oma_actors.checkpoint import fork_run, run_history
from oma_actors.domain.snapshot import ForkedFrom
from oma_actors.journal import JournalEvent, open_journal, verify_events
from oma_actors.journal import vocabulary as v

ASKED = {"type": "text", "text": "Investigate deploy failure"}
ANSWER = {"type": "text", "text": "I will look"}
OTHER = {"type": "text", "text": "Something else entirely"}


def ev(
    run: str, seq: int, kind: str, sources: list[int] | None = None, **data: Any
) -> JournalEvent:
    return JournalEvent(
        seq=seq, type=kind, run_id=run, attempt=1, timestamp_unix_ms=1_700_000_000_000 + seq,
        task_id="t", agent_name="a", source_event_seqs=sources, data=data,
    )  # fmt: skip


def request(run: str, seq: int, lineage: list[int], content: dict[str, Any]) -> JournalEvent:
    block = v.request_block(
        message_index=0, block_index=0, role="assistant", block=content, source_event_seqs=lineage
    )
    return ev(run, seq, "llm/request", turn=1, model="m", blocks=[block])


def parent(run: str = "parent") -> list[JournalEvent]:
    """Seqs 1..4: the prompt, an answer, a call, and (after the fork point 2) other content."""
    return [
        ev(run, 1, "user/message", message={"role": "user", "content": [ASKED]}, origin="input"),
        ev(run, 2, "assistant/message", [1], origin="response",
           message={"role": "assistant", "content": [ANSWER]}),
        ev(run, 3, "assistant/message", [1], origin="response",
           message={"role": "assistant", "content": [OTHER]}),
        ev(run, 4, "tool/call", [3], call={"type": "tool_use", "id": "c", "name": "x", "input": {}}),
    ]  # fmt: skip


def child(run: str = "child") -> list[JournalEvent]:
    """Forked at the parent's seq 2: a call citing the parent's answer, and a request whose
    block is that answer (its lineage: the parent's seq 2)."""
    return [
        ev(run, 3, "run/start", mode="restore"),
        ev(run, 4, "tool/call", [2], call={"type": "tool_use", "id": "d", "name": "x", "input": {}}),
        request(run, 5, [2], ANSWER),
    ]  # fmt: skip


def found(findings: list[Any]) -> list[tuple[str, str, int, str | None, tuple[int, ...]]]:
    return [(f.code, f.reason, f.seq, f.run_id, f.missing_seqs) for f in findings]


FORKED = {"child": ForkedFrom(run_id="parent", seq=2)}


def test_a_childs_links_to_its_parent_before_the_fork_point_resolve() -> None:
    events = [*parent(), *child()]
    unknown = verify_events(events)
    assert found(unknown.inconclusive) == [
        ("BROKEN_LINK", "missing-source", 4, "child", (2,)),
        ("MISSING_CONTEXT_REPLACE", "source-unavailable", 5, "child", (2,)),
    ], "without forks: gaps, as before"
    result = verify_events(events, forks=FORKED)
    assert (result.ok, result.failures, result.inconclusive) == (True, [], [])
    assert result.stats == unknown.stats


def test_a_genuinely_broken_link_of_a_child_is_still_reported() -> None:
    # Links to the parent's event above the fork point (its seq 3, whose content the block
    # has, is not the child's past), to a seq neither run holds, and forward: each is reported
    # as without the fork.
    events = [
        *parent(),
        ev("child", 5, "run/start", mode="restore"),
        ev("child", 6, "tool/call", [3]),
        request("child", 8, [3], OTHER),
        ev("child", 9, "tool/call", [7]),
        ev("child", 10, "tool/call", [11]),
    ]
    result = verify_events(events, forks=FORKED)
    assert found(result.inconclusive) == [
        ("BROKEN_LINK", "missing-source", 6, "child", (3,)),
        ("BROKEN_LINK", "missing-source", 9, "child", (7,)),
        ("MISSING_CONTEXT_REPLACE", "source-unavailable", 8, "child", (3,)),
    ]
    assert found(result.failures) == [("BROKEN_LINK", "forward-reference", 10, "child", ())]
    # The parent lacks the cited event (its head evicted): still a gap.
    evicted = verify_events([*parent()[2:], *child()], forks=FORKED)
    assert [(f.seq, f.run_id, f.missing_seqs) for f in evicted.inconclusive] == [
        (3, "parent", (1,)),
        (4, "child", (2,)),
        (5, "child", (2,)),
    ]
    # The parent's events are not in this journal: nothing to follow.
    alone = verify_events(child(), forks=FORKED)
    assert [f.missing_seqs for f in alone.inconclusive] == [(2,), (2,)]


def test_a_fork_of_a_fork_resolves_up_the_chain_and_a_cycle_ends() -> None:
    # grand forked from child at 4, child from parent at 2: the grandchild's link to seq 1 is
    # the parent's (below both fork points), to 4 and 3 the child's (its own events win over
    # the parent's 3, which is above the child's fork point).
    grand = [ev("grand", 6, "tool/call", [1]), ev("grand", 7, "tool/call", [4, 3])]
    forks = {**FORKED, "grand": ForkedFrom(run_id="child", seq=4)}
    result = verify_events([*parent(), *child(), *grand], forks=forks)
    assert [(f.seq, f.run_id, f.missing_seqs) for f in result.inconclusive] == []
    # Without the child's own fork the chain stops at the child: seq 1 is a gap.
    partial = verify_events([*parent(), *child(), *grand], forks={"grand": forks["grand"]})
    assert [(f.seq, f.run_id) for f in partial.inconclusive if f.run_id == "grand"] == [
        (6, "grand")
    ]
    # Runs that name each other as parents: resolved as far as the chain goes, never looping.
    looped = {
        "child": ForkedFrom(run_id="grand", seq=9),
        "grand": ForkedFrom(run_id="child", seq=4),
    }
    ended = verify_events([*child(), *grand], forks=looped)
    assert [(f.seq, f.run_id, f.missing_seqs) for f in ended.inconclusive] == [
        (4, "child", (2,)),
        (5, "child", (2,)),
        (6, "grand", (1,)),
    ]


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


async def forked(space: Workspace) -> int:
    """Run ``r1`` (two turns of two idempotent calls), fork ``child`` at its first call's
    ``tool/call`` and restore the child to its end: the fork point's seq."""
    team = make_team(2, 2, "idempotent", Effects())
    assert (await run_journal_first(space, team, 1)).success
    at = next(p for p in await run_history(space.store(), "r1") if p.boundary == "tool_dispatch")
    await fork_run(space.store(), "r1", at_seq=at.seq, new_run_id="child")
    assert (await restore_run(space, team, "child")).success
    return at.seq


async def test_oma_verify_follows_a_jsonl_childs_links_with_the_store(tmp_path: Path) -> None:
    space = Workspace(tmp_path)
    at = await forked(space)
    journal, store = str(space.journal_path), str(space.store_path)

    plain = await asyncio.to_thread(oma, "verify", journal, "--json")
    assert plain.returncode == 0, plain.stderr
    gaps = json.loads(plain.stdout)["inconclusive"]
    assert gaps, "without the store the child's links to its parent are gaps"
    assert {f["run_id"] for f in gaps} == {"child"}
    assert all(seq <= at for f in gaps for seq in f["missing_seqs"])

    done = await asyncio.to_thread(oma, "verify", journal, "--store", store, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["ok"], result["failures"], result["inconclusive"]) == (True, [], [])
    assert result["runs"] == ["r1", "child"]

    # The parent's event a child's link cites is gone: that link is reported again.
    cited = gaps[0]["missing_seqs"][0]
    lines = space.journal_path.read_text().splitlines()
    kept = [
        line
        for line in lines
        if not (json.loads(line)["runId"] == "r1" and json.loads(line)["seq"] == cited)
    ]
    space.journal_path.write_text("\n".join(kept) + "\n")
    broken = await asyncio.to_thread(oma, "verify", journal, "--store", store, "--json")
    assert broken.returncode == 0, broken.stderr
    left = json.loads(broken.stdout)["inconclusive"]
    assert left
    assert {(f["run_id"], tuple(f["missing_seqs"])) for f in left} >= {("child", (cited,))}

    absent = await asyncio.to_thread(oma, "verify", journal, "--store", str(tmp_path / "no.json"))
    assert (absent.returncode, absent.stdout) == (2, "")
    assert "no store file at" in absent.stderr


async def test_oma_verify_of_a_sqlite_store_follows_its_forks(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path / 'state.db'}"
    team = make_team(2, 2, "idempotent", Effects())

    async def run(run_id: str, *, restore: bool) -> None:
        journal = open_journal(uri)
        try:
            async with open_store(uri) as store:
                checkpoint = CheckpointOptions(store=store, run_id=run_id)
                options = JournalOptions(journal, durable=True)
                if restore:
                    result = await OpenMultiAgent().restore(
                        team, checkpoint=checkpoint, journal=options
                    )
                else:
                    result = await OpenMultiAgent().run_tasks(
                        team, tasks(1), checkpoint=checkpoint, journal=options
                    )
                assert result.success
        finally:
            await journal.close()

    await run("r1", restore=False)
    async with open_store(uri) as store:
        at = next(p for p in await run_history(store, "r1") if p.boundary == "tool_dispatch")
        await fork_run(store, "r1", at_seq=at.seq, new_run_id="child")
    await run("child", restore=True)

    done = await asyncio.to_thread(oma, "verify", uri, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["ok"], result["failures"], result["inconclusive"]) == (True, [], [])
    assert result["runs"] == ["r1", "child"]

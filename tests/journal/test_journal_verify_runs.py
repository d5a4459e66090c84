"""``verify_run`` on a journal that holds several runs: each run is verified on its own.

Seqs are numbered per run (``seq`` strictly increasing per ``runId``, spec 17.2), and one journal
may hold many runs: README's "one file for many runs", a fork child whose events continue in its
parent's journal. Two healthy runs in one file verify; a defect of one run fails naming that run;
a reference resolves only among its own run's events.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from oma_actors import AgentConfig, CheckpointOptions, JournalOptions, OpenMultiAgent, Task, Team
from oma_actors.checkpoint import fork_run, run_history
from oma_actors.journal import JournalEvent, JsonlRunJournal, verify_events, verify_run
from oma_actors.journal import vocabulary as v
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.testing import ScriptedAdapter, text_response

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


def one_run(run: str, answer: dict[str, Any] = ANSWER) -> list[JournalEvent]:
    """A healthy run: seqs 1..4, every link and request block reproducible within the run."""
    return [
        ev(run, 1, "user/message", message={"role": "user", "content": [ASKED]}, origin="input"),
        ev(run, 2, "assistant/message", [1], origin="response",
           message={"role": "assistant", "content": [answer]}),
        ev(run, 3, "tool/call", [2], call={"type": "tool_use", "id": "c", "name": "x", "input": {}}),
        request(run, 4, [2], answer),
    ]  # fmt: skip


def found(findings: list[Any]) -> list[tuple[str, str, int, str | None]]:
    return [(f.code, f.reason, f.seq, f.run_id) for f in findings]


async def test_two_healthy_runs_in_one_journal_verify() -> None:
    result = await verify_run([*one_run("A"), *one_run("B")])
    assert (result.ok, result.failures, result.inconclusive) == (True, [], [])
    assert result.runs == ["A", "B"]
    assert result.stats == {"events": 8, "requests": 2, "blocks_checked": 2}


async def test_interleaved_runs_verify_each_in_its_own_order() -> None:
    # Two runs writing to one journal at once: their lines interleave, each run stays ordered.
    a, b = one_run("A"), one_run("B")
    mixed = [a[0], b[0], b[1], a[1], a[2], b[2], b[3], a[3]]
    result = verify_events(mixed)
    assert (result.ok, result.failures, result.inconclusive) == (True, [], [])
    assert result.runs == ["A", "B"]


async def test_a_duplicate_seq_within_one_run_fails_naming_that_run() -> None:
    b = one_run("B")
    result = await verify_run([*one_run("A"), *b[:2], dataclasses.replace(b[1]), *b[2:]])
    assert not result.ok
    assert found(result.failures) == [("SEQ_NOT_MONOTONIC", "duplicate-sequence", 2, "B")]

    reordered = await verify_run([*one_run("A"), b[0], b[2], b[1], b[3]])
    assert found(reordered.failures) == [("SEQ_NOT_MONOTONIC", "out-of-order-sequence", 2, "B")]


async def test_every_kind_of_finding_names_its_run() -> None:
    b = one_run("B")
    forward = dataclasses.replace(b[2], source_event_seqs=[9])
    unexplained = request("B", 4, [2], OTHER)
    result = await verify_run([*one_run("A"), b[0], b[1], forward, unexplained])
    assert found(result.failures) == [
        ("BROKEN_LINK", "forward-reference", 3, "B"),
        ("MISSING_CONTEXT_REPLACE", "not-reproducible", 4, "B"),
    ]
    evicted = await verify_run([*one_run("A"), *one_run("B")[1:]])
    assert evicted.ok
    assert [(f.seq, f.run_id, f.missing_seqs) for f in evicted.inconclusive] == [(2, "B", (1,))]


async def test_a_fork_childs_events_after_its_parents_verify() -> None:
    # The child's seqs continue above the fork point (2) in the parent's journal, so they
    # repeat seqs the parent used after the fork; each resolves within its own run.
    parent = one_run("parent")
    child = [
        ev("child", 3, "run/start", mode="restore"),
        ev("child", 4, "assistant/message", [2], origin="response",
           message={"role": "assistant", "content": [OTHER]}),
        request("child", 5, [4], OTHER),
    ]  # fmt: skip
    result = await verify_run([*parent, *child])
    assert result.runs == ["parent", "child"]
    assert result.failures == []
    # The child's link to seq 2, its parent's event before the fork point, is a gap (the journal
    # does not say the runs are related), never resolved against another run's event.
    assert [(f.seq, f.run_id, f.missing_seqs) for f in result.inconclusive] == [(4, "child", (2,))]
    assert result.ok


async def test_a_reference_never_resolves_to_another_runs_event_of_that_seq() -> None:
    # Run B's block cites B's seq 2; A's seq 2 (earlier in the file) carries other content.
    result = await verify_run([*one_run("A", answer=OTHER), *one_run("B")])
    assert (result.ok, result.failures, result.inconclusive) == (True, [], [])
    lying = [*one_run("A"), *one_run("B", answer=OTHER)[:3], request("B", 4, [2], ANSWER)]
    assert found((await verify_run(lying)).failures) == [
        ("MISSING_CONTEXT_REPLACE", "not-reproducible", 4, "B")
    ]


def _team() -> Team:
    return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(lambda m, o: text_response("ok")))])


async def test_readme_one_file_for_many_runs_verifies(tmp_path: Path) -> None:
    journal = JsonlRunJournal(tmp_path / "journal.jsonl", flush_interval_ms=0)
    store = InMemoryStore()
    try:
        for run_id in ("run-A", "run-B"):
            result = await OpenMultiAgent().run_tasks(
                _team(), [Task("one", "x", assignee="w")],
                checkpoint=CheckpointOptions(store=store, run_id=run_id), journal=journal,
            )  # fmt: skip
            assert result.success
            verdict = await verify_run(journal)
            assert (verdict.ok, verdict.failures) == (True, [])
    finally:
        await journal.close()
    assert verdict.runs == ["run-A", "run-B"]


async def test_a_real_fork_child_in_its_parents_journal_verifies(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"

    async def run(run_id: str, *, restore: bool) -> None:
        journal = JsonlRunJournal(path, flush_interval_ms=0)
        checkpoint = CheckpointOptions(store=FileStore(tmp_path / "state.json"), run_id=run_id)
        options = JournalOptions(journal, durable=True)
        try:
            if restore:
                result = await OpenMultiAgent().restore(
                    _team(), checkpoint=checkpoint, journal=options
                )
            else:
                result = await OpenMultiAgent().run_tasks(
                    _team(), [Task("one", "x", assignee="w", id="t0")],
                    checkpoint=checkpoint, journal=options,
                )  # fmt: skip
            assert result.success
        finally:
            await journal.close()

    await run("parent", restore=False)
    points = await run_history(FileStore(tmp_path / "state.json"), "parent")
    at = points[len(points) // 2].seq
    await fork_run(FileStore(tmp_path / "state.json"), "parent", at_seq=at, new_run_id="child")
    await run("child", restore=True)

    journal = JsonlRunJournal(path)
    try:
        events = await journal.read_from(0)
        verdict = await verify_run(journal)
    finally:
        await journal.close()
    child_seqs = {e.seq for e in events if e.run_id == "child"}
    assert child_seqs & {e.seq for e in events if e.run_id == "parent"}, "seqs overlap"
    assert (verdict.ok, verdict.failures) == (True, [])
    assert verdict.runs == ["parent", "child"]

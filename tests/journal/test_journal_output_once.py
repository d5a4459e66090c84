"""Each tool output reaches a journal-first journal once (issue 19, item 5), and the old form reads.

Journal-first, a ``tool/result`` holds the output (its record leaves out an equal ``output``) and
the results message refers to it by seq. These tests run real durable runs and check: the
journal holds each output once; every durable save still restores exactly (the same check as
``test_journal_durable``) from the journal rewritten in the form written before the change (every
output in full), so an old journal keeps restoring; ``verify_run`` resolves the references.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_journal_durable import WORKLOADS, as_written, restore_view, run_capturing, team

from oma_actors import OpenMultiAgent, Task
from oma_actors.journal import JournalOptions, JsonlRunJournal, verify_run
from oma_actors.journal.event import RECORDED_RESULT


def old_form(journal: bytes) -> bytes:
    """``journal`` as it was written before issue 19 item 5: every output in full.

    A results message's reference becomes the block of the ``tool/result`` it names; a record
    gets back the name and input of its call and its result's text.
    """
    lines = [json.loads(line) for line in journal.splitlines()]
    by_seq = {line["seq"]: line for line in lines}
    calls = {line["call"]["id"]: line["call"] for line in lines if line["type"] == "tool/call"}
    out = []
    for line in lines:
        record = line.get("record")
        if line["type"] == "tool/result" and isinstance(record, dict):
            call = calls[line["toolCallId"]]
            record.setdefault("toolName", call["name"])
            record.setdefault("input", call["input"])
            record.setdefault("output", line["result"]["content"])  # a string here
            # OMA's member order: toolName, input, output, duration.
            line["record"] = {k: record[k] for k in ("toolName", "input", "output", "duration")}
        if line["type"] == "user/message":
            content = line["message"]["content"]
            for i, block in enumerate(content):
                if isinstance(block, dict) and RECORDED_RESULT in block:
                    content[i] = by_seq[block[RECORDED_RESULT]]["result"]
        out.append(json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode())
    return b"".join(line + b"\n" for line in out)


def outputs(journal: bytes) -> list[str]:
    """The output of each ``tool/result`` of the run, in order."""
    found = []
    for line in journal.splitlines():
        event = json.loads(line)
        if event["type"] == "tool/result":
            found.append(event["result"]["content"])
    return found


@pytest.mark.parametrize("name", ["parallel_calls", "two_tasks_one_journal"])
async def test_each_output_is_in_the_journal_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    await run_capturing(tmp_path, WORKLOADS[name], monkeypatch)
    journal = (tmp_path / "run.jsonl").read_bytes()
    written = outputs(journal)
    assert written, "the run recorded no tool/result"
    for output in set(written):
        # JSON-escaped as the journal holds it; each output is 300+ bytes long, and calls of
        # one turn give the same one: as many copies as tool/result events, none besides.
        copies = journal.count(json.dumps(output)[1:-1].encode())
        assert copies == written.count(output), output[:40]


@pytest.mark.parametrize("name", ["parallel_calls", "unsafe_tool", "two_tasks_one_journal"])
async def test_an_old_form_journal_restores_every_save_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    captures, _, _, the_team = await run_capturing(tmp_path, WORKLOADS[name], monkeypatch)
    rewritten = 0
    for capture in captures:
        old = old_form(capture.journal)
        rewritten += old != capture.journal
        view = await restore_view(tmp_path, replace(capture, journal=old), the_team)
        assert as_written(view) == as_written(capture.saved), capture.boundary
    assert rewritten > 0, "no capture held an output written once: the test checks nothing"


async def test_verify_resolves_the_results_references(tmp_path: Path) -> None:
    """With ``enforce_lineage`` each request block must be reproducible from its lineage: a
    result block's source is the results message, whose reference names the tool/result."""
    path = tmp_path / "run.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    tasks = [Task("task", "x", assignee="w", id="t0")]
    options: Any = JournalOptions(journal, durable=True, enforce_lineage=True)
    result = await OpenMultiAgent().run_tasks(team(3, 2, "idempotent", []), tasks, journal=options)
    await journal.close()
    assert result.success
    assert RECORDED_RESULT.encode() in path.read_bytes()
    verdict = await verify_run(JsonlRunJournal(path))
    assert verdict.ok, verdict.failures
    assert verdict.stats["blocks_checked"] > 0

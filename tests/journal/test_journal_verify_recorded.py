"""``verify_run`` on a journal-first results message whose ``recorded`` target is lost.

Journal-first writes each tool output once, in its ``tool/result``; the results message refers to
it (``{"type": "tool_result", "tool_use_id": ..., "recorded": seq}``). OMA's JR-23 makes a
missing link target inconclusive, but this reference is ours: losing its target loses the output,
so it is a failure. OMA's own links (``sourceEventSeqs``) keep OMA's rule.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING, Any

from oma_actors.journal import JournalEvent, JsonlRunJournal, to_json_line, verify_run

if TYPE_CHECKING:
    from pathlib import Path


def ev(seq: int, kind: str, sources: list[int] | None = None, **data: Any) -> JournalEvent:
    return JournalEvent(
        seq=seq, type=kind, run_id="run", attempt=1, timestamp_unix_ms=seq, task_id="t",
        agent_name="a", source_event_seqs=sources, data=data,
    )  # fmt: skip


def results(seq: int, recorded: Any, *, call: str = "c", sources: list[int] | None = None) -> Any:
    block = {"type": "tool_result", "tool_use_id": call, "recorded": recorded}
    return ev(
        seq, "user/message", sources if sources is not None else [recorded],
        message={"role": "user", "content": [block]}, origin="tool_results",
    )  # fmt: skip


def journal(*, call_id: str = "c") -> list[JournalEvent]:
    """A journal-first tool round: prompt, answer, call, result, the results message."""
    return [
        ev(1, "user/message", message={"role": "user", "content": "go"}, origin="input"),
        ev(2, "assistant/message", message={"role": "assistant", "content": [
            {"type": "tool_use", "id": "c", "name": "search", "input": {}}]}, origin="response"),
        ev(3, "tool/call", [2], call={"type": "tool_use", "id": "c", "name": "search", "input": {}}),
        ev(4, "tool/result", [3], toolCallId=call_id,
           result={"type": "tool_result", "tool_use_id": call_id, "content": "the output"}),
        results(5, 4),
    ]  # fmt: skip


def found(findings: list[Any]) -> list[tuple[str, str, int, tuple[int, ...]]]:
    return [(f.code, f.reason, f.seq, f.missing_seqs) for f in findings]


async def test_a_whole_tool_round_verifies() -> None:
    result = await verify_run(journal())
    assert (result.ok, result.failures, result.inconclusive) == (True, [], [])


async def test_a_lost_recorded_result_fails() -> None:
    events = [e for e in journal() if e.seq != 4]
    result = await verify_run(events)
    assert not result.ok
    assert found(result.failures) == [("BROKEN_LINK", "missing-recorded-result", 5, (4,))]
    assert result.failures[0].run_id == "run"
    # The same seq is not also reported as OMA's inconclusive gap.
    assert result.inconclusive == []


async def test_a_recorded_reference_to_another_event_fails() -> None:
    wrong_call = await verify_run(journal(call_id="other"))
    assert found(wrong_call.failures) == [("BROKEN_LINK", "wrong-recorded-result", 5, ())]
    events = journal()
    not_a_result = await verify_run([*events[:4], results(5, 3)])
    assert found(not_a_result.failures) == [("BROKEN_LINK", "wrong-recorded-result", 5, ())]
    for bad in ("4", [4], True, 5, 9):  # not a seq, itself, after itself
        odd = await verify_run([*events[:4], results(5, bad, sources=[4])])
        assert found(odd.failures) == [("BROKEN_LINK", "wrong-recorded-result", 5, ())], bad


async def test_omas_own_links_keep_omas_rule() -> None:
    """A missing ``sourceEventSeqs`` target is still an inconclusive gap (JR-22, JR-23)."""
    events = [e for e in journal() if e.seq != 3]  # the tool/call the result names
    result = await verify_run(events)
    assert result.ok
    assert found(result.inconclusive) == [("BROKEN_LINK", "missing-source", 4, (3,))]


async def test_a_recorded_target_below_the_runs_first_event_stays_inconclusive() -> None:
    """An evicted or cut head (LM-32) is not an error: the target may have been dropped with it."""
    events = [e for e in journal() if e.seq == 5]
    result = await verify_run(events)
    assert result.ok
    assert found(result.inconclusive) == [("BROKEN_LINK", "missing-source", 5, (4,))]


def test_oma_verify_fails_a_journal_that_lost_a_recorded_result(tmp_path: Path) -> None:
    path = tmp_path / "gap.jsonl"
    path.write_text("".join(f"{to_json_line(e)}\n" for e in journal() if e.seq != 4))
    done = subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", "verify", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "BROKEN_LINK/missing-recorded-result" in done.stdout
    assert "missing [4]" in done.stdout


async def test_a_jsonl_file_that_lost_a_recorded_result_fails(tmp_path: Path) -> None:
    path = tmp_path / "gap.jsonl"
    path.write_text("".join(f"{to_json_line(e)}\n" for e in journal() if e.seq != 4))
    reader = JsonlRunJournal(path)
    result = await verify_run(reader)
    await reader.close()
    assert found(result.failures) == [("BROKEN_LINK", "missing-recorded-result", 5, (4,))]

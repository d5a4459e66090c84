"""Guards of ``verify_run`` / ``verify_events`` that no other test holds (a mutation sweep).

Each test builds a small damaged journal by hand (``verify_run`` audits any journal, a corrupt or
hostile one included) and names in its docstring the check in ``journal/verify.py`` it holds.
"""

from __future__ import annotations

from typing import Any

from oma_actors.domain.snapshot import ForkedFrom
from oma_actors.journal import JournalEvent, verify_events, verify_run
from oma_actors.journal import vocabulary as v

ANSWER = {"type": "text", "text": "I will look"}


def ev(
    seq: int, kind: str, sources: list[int] | None = None, *, run: str = "run", **data: Any
) -> JournalEvent:
    return JournalEvent(
        seq=seq, type=kind, run_id=run, attempt=1, timestamp_unix_ms=1_700_000_000_000 + seq,
        task_id="t", agent_name="a", source_event_seqs=sources, data=data,
    )  # fmt: skip


def answer(seq: int, *, run: str = "run", content: Any = None) -> JournalEvent:
    return ev(
        seq, "assistant/message", run=run, origin="response",
        message={"role": "assistant", "content": [content or ANSWER]},
    )  # fmt: skip


def request(seq: int, lineage: list[Any], block: Any, *, run: str = "run") -> JournalEvent:
    """An ``llm/request`` of one block whose lineage is ``lineage`` (written as given)."""
    descriptor = v.request_block(
        message_index=0, block_index=0, role="assistant", block=block, source_event_seqs=[1]
    )
    descriptor["sourceEventSeqs"] = lineage
    return ev(seq, "llm/request", run=run, turn=1, model="m", blocks=[descriptor])


def found(findings: list[Any]) -> list[tuple[str, str, int]]:
    return [(f.code, f.reason, f.seq) for f in findings]


def tool_round(result_event: JournalEvent) -> list[JournalEvent]:
    """A prompt, a tool call of ``c``, ``result_event`` at seq 4, and a journal-first results
    message at seq 5 whose block refers to seq 4 as the recorded result of ``c``."""
    block = {"type": "tool_result", "tool_use_id": "c", "recorded": 4}
    return [
        ev(1, "user/message", message={"role": "user", "content": "go"}, origin="input"),
        ev(2, "assistant/message", origin="response", message={"role": "assistant", "content": [
            {"type": "tool_use", "id": "c", "name": "search", "input": {}}]}),
        ev(3, "tool/call", [2], call={"type": "tool_use", "id": "c", "name": "search", "input": {}}),
        result_event,
        ev(5, "user/message", [4], message={"role": "user", "content": [block]},
           origin="tool_results"),
    ]  # fmt: skip


async def test_a_recorded_reference_to_an_event_that_is_not_a_tool_result_fails() -> None:
    """Holds ``_is_recorded_result``'s ``source.type == "tool/result"``: an event of another type
    that happens to carry a ``result`` of the right call is not where the output was recorded."""
    output = {"type": "tool_result", "tool_use_id": "c", "content": "the output"}
    impostor = ev(4, "tool/progress", [3], toolCallId="c", result=output)
    result = await verify_run(tool_round(impostor))
    assert not result.ok
    assert found(result.failures) == [("BROKEN_LINK", "wrong-recorded-result", 5)]
    genuine = ev(4, "tool/result", [3], toolCallId="c", result=output)
    assert (await verify_run(tool_round(genuine))).ok


async def test_a_request_block_is_not_reproduced_by_another_calls_result() -> None:
    """Holds ``_recorded``'s ``_is_recorded_result`` check: a results message whose reference
    names another call's ``tool/result`` does not resolve to that result, so a request block
    equal to it is ``not-reproducible`` (besides the reference's own failure)."""
    output = {"type": "tool_result", "tool_use_id": "other", "content": "the output"}
    events = [
        *tool_round(ev(4, "tool/result", [3], toolCallId="other", result=output)),
        request(6, [5], output),
    ]
    result = await verify_run(events)
    assert found(result.failures) == [
        ("BROKEN_LINK", "wrong-recorded-result", 5),
        ("MISSING_CONTEXT_REPLACE", "not-reproducible", 6),
    ]


async def test_a_request_block_whose_lineage_points_forward_fails() -> None:
    """Holds ``_references``' request-block branch: a block citing a seq at or above its
    request is a ``forward-reference`` failure, even when that later event reproduces it."""
    events = [answer(1), request(2, [3], ANSWER), answer(3)]
    result = await verify_run(events)
    assert not result.ok
    assert ("BROKEN_LINK", "forward-reference", 2) in found(result.failures)
    assert (await verify_run([answer(1), request(2, [1], ANSWER), answer(3)])).ok


async def test_a_boolean_in_a_lineage_is_no_seq() -> None:
    """Holds ``_ints``' ``not isinstance(item, bool)``: ``true`` in ``sourceEventSeqs`` is not
    seq 1 (as a dict key it would find it), so it reproduces nothing."""
    result = await verify_run([answer(1), request(2, [True], ANSWER)])
    assert not result.ok
    assert found(result.failures) == [("MISSING_CONTEXT_REPLACE", "not-reproducible", 2)]
    assert (await verify_run([answer(1), request(2, [1], ANSWER)])).ok


def test_a_chain_of_forks_stops_at_the_lowest_fork_point() -> None:
    """Holds ``_sources``' ``limit = min(limit, origin.seq)``: a grandchild forked from its
    parent at seq 2, whose parent was forked from the root at seq 4, does not resolve among the
    root's events above seq 2 (its state is the root's up to 2 only)."""
    other = {"type": "text", "text": "after the first fork point"}
    root = [
        ev(1, "user/message", run="root", message={"role": "user", "content": "go"}),
        answer(2, run="root"),
        answer(3, run="root", content=other),
        ev(4, "tool/call", [3], run="root", call={"type": "tool_use", "id": "c", "name": "x"}),
    ]
    child = [ev(5, "run/start", run="child", mode="restore")]
    grandchild = [request(5, [2], ANSWER, run="grand"), request(6, [3], other, run="grand")]
    forks = {
        "grand": ForkedFrom(run_id="child", seq=2),
        "child": ForkedFrom(run_id="root", seq=4),
    }
    result = verify_events([*root, *child, *grandchild], forks=forks)
    assert result.ok  # an unresolved source is inconclusive, not a failure
    assert [(f.run_id, f.seq, f.reason, f.missing_seqs) for f in result.inconclusive] == [
        ("grand", 6, "source-unavailable", (3,))
    ]

"""Deterministic scripted runs whose journals are compared byte for byte across refactors.

Every run is a pure function of its scenario and journal mode: the model's answer depends only
on the conversation, tool call ids and task ids are fixed, tasks run one at a time. The only
varying bytes of a journal line are ``timestampUnixMs``, a tool call record's ``duration`` (and
the run id of a run without a checkpoint); ``normalized`` blanks them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Reviewer, Suspend, decide_approval
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import (
    ChatOptions,
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

# Task title -> the tool calls of each model turn (None: the final answer).
Script = dict[str, list[list[str] | None]]

SCRIPTS: dict[str, Script] = {
    "chain": {"alpha": [["A"], None], "beta": [None]},
    "parallel": {"alpha": [["P", "Q"], None], "beta": [None]},
    "witherror": {"alpha": [["P", "boom"], None], "beta": [None]},
    "rounds": {"alpha": [["A"], ["B"], None], "beta": [None]},
    "bulky": {"alpha": [["K1"], ["K2"], ["K3"], None], "beta": [None]},
}
MODES = ("oma", "durable", "nocheckpoint")
TEAM_PLAN = (
    '[{"title": "alpha", "description": "work", "assignee": "worker"},'
    ' {"title": "beta", "description": "report", "assignee": "worker", "dependsOn": ["alpha"]}]'
)


class Label(BaseModel):
    label: str


def _text(message: Message) -> str:
    parts = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.append(str(block.content))
    return " ".join(parts)


def worker_model(script: Script) -> ScriptedAdapter:
    """Answers from the task's script, by the number of assistant turns so far."""

    def respond(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        prompt = _text(messages[0])
        title = next(t for t in script if f"# Task: {t}" in prompt)
        turn = sum(m.role == "assistant" for m in messages)
        step = script[title][turn]
        usage = TokenUsage(10 + turn, 3)
        if step is None:
            return LLMResponse([TextBlock(f"{title} done")], usage=usage)
        calls = [
            ToolUseBlock(f"{title}-{turn}-{label}", "ledger", {"label": label}) for label in step
        ]
        return LLMResponse([TextBlock(f"calling {len(calls)}"), *calls], stop_reason="tool_use", usage=usage)  # fmt: skip

    return ScriptedAdapter(respond)


def ledger_tool() -> object:
    async def ledger(args: Label, ctx: ToolContext) -> str:
        if args.label == "boom":
            raise RuntimeError("the ledger refused boom")
        if args.label.startswith("K"):
            return args.label * 512  # about 1 KiB of output
        return f"recorded {args.label}"

    return define_tool(
        name="ledger", description="records a label", input_model=Label, execute=ledger
    )


def team_for(scenario: str) -> Team:
    worker = AgentConfig("worker", adapter=worker_model(SCRIPTS[scenario]), tools=[ledger_tool()])  # type: ignore[list-item]
    return Team("crew", [worker], shared_memory=True)


def tasks_for(scenario: str) -> list[Task]:
    return [
        Task("alpha", "alpha: call the ledger, then report", id="alpha", assignee="worker"),
        Task("beta", "beta: report", id="beta", assignee="worker", depends_on=["alpha"]),
    ]


async def run_scenario(scenario: str, mode: str, path: Path) -> None:
    """Run ``scenario`` with a JSONL journal at ``path`` in ``mode`` (see ``MODES``)."""
    journal = JsonlRunJournal(str(path))
    options = JournalOptions(journal, durable=mode == "durable")
    checkpoint = None
    if mode != "nocheckpoint":
        checkpoint = CheckpointOptions(store=InMemoryStore(), run_id=f"{scenario}-{mode}")
    oma = OpenMultiAgent(max_concurrency=1)
    # A coordinator's plan gets random task ids, and the synthesis prompt (hashed in its
    # llm/request) names them: number them instead.
    counter = itertools.count(1)
    numbered = mock.patch(
        "oma_actors.domain.tasks.new_id", side_effect=lambda: f"task-{next(counter)}"
    )
    try:
        numbered.start()
        if scenario == "restore":
            await _suspend_then_restore(oma, checkpoint, options)
        elif scenario == "team":
            await oma.run_team(
                team_for("chain"),
                "alpha then beta",
                coordinator=AgentConfig("lead", adapter=_lead()),
                checkpoint=checkpoint,
                journal=options,
            )
        else:
            await oma.run_tasks(
                team_for(scenario), tasks_for(scenario), checkpoint=checkpoint, journal=options
            )
    finally:
        numbered.stop()
        await journal.close()


async def _suspend_then_restore(
    oma: OpenMultiAgent, checkpoint: CheckpointOptions | None, options: JournalOptions
) -> None:
    """alpha's ledger call waits for a reviewer; approved, a second attempt restores the run."""
    if checkpoint is None:
        return  # a suspension needs a checkpoint: the run is not made
    team, tasks = team_for("rounds"), tasks_for("rounds")
    first = await OpenMultiAgent(
        max_concurrency=1, on_tool_call=lambda call: Suspend("review")
    ).run_tasks(team, tasks, checkpoint=checkpoint, journal=options)
    [request] = first.pending_approvals
    await decide_approval(
        checkpoint.store,
        request_id=request.id,
        request_hash=request.request_hash,
        decision="approve",
        reviewer=Reviewer("finance"),
    )
    await OpenMultiAgent(max_concurrency=1, on_tool_call=lambda call: False).restore(
        team, checkpoint=checkpoint, journal=options
    )
    del oma


def _lead() -> ScriptedAdapter:
    def respond(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if len(messages) == 1 and "alpha then beta" in _text(messages[0]):
            return LLMResponse([TextBlock(TEAM_PLAN)], usage=TokenUsage(5, 5))
        return LLMResponse([TextBlock("synthesis")], usage=TokenUsage(4, 4))

    return ScriptedAdapter(respond)


ALL_RUNS: tuple[tuple[str, str], ...] = (
    *((s, m) for s in SCRIPTS for m in MODES),
    ("team", "oma"),
    ("team", "durable"),
    ("team", "nocheckpoint"),
    ("restore", "oma"),
    ("restore", "durable"),
)

_STAMP = re.compile(rb'"timestampUnixMs":\d+')
_DURATION = re.compile(rb'"duration":\d+')  # a tool call record's measured wall time
_RUN = re.compile(rb'"runId":"[^"]*"')


# An approval request and decision carry wall-clock ISO stamps and a hash over them.
_ISO = re.compile(rb'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))"')
# A journal-first restore's run/start carries its attempt's fresh random trace ids (D14).
_TRACE = re.compile(rb'"(lastTraceId|lastRootSpanId)":"[0-9a-f]+"')
_REQUEST_HASH = re.compile(rb'"(requestHash|request_hash)":"[^"]*"')
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalized(data: bytes, *, run_id: bool) -> bytes:
    """The journal's bytes with the wall-clock stamps (and, if asked, the run id) blanked.

    Random ids (a coordinator's plan gets UUID task ids) are renamed by order of appearance.
    """
    data = _STAMP.sub(b'"timestampUnixMs":0', data)
    data = _DURATION.sub(b'"duration":0', data)
    data = _ISO.sub(b'"<time>"', data)
    data = _REQUEST_HASH.sub(rb'"\1":"<hash>"', data)
    data = _TRACE.sub(rb'"\1":"<trace>"', data)
    if run_id:
        data = _RUN.sub(b'"runId":"-"', data)
    names: dict[bytes, bytes] = {}

    def rename(match: re.Match[bytes]) -> bytes:
        return names.setdefault(match.group(0), b"uuid-%d" % len(names))

    return _UUID.sub(rename, data)


__all__ = ["ALL_RUNS", "normalized", "run_scenario"]

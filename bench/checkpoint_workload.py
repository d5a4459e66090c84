"""Our workload: one task on one agent, a scripted model asking for one tool call per turn.

Each model call asks for one ``echo`` tool call whose result is ``payload`` bytes, so each turn
adds about that much to the conversation and crosses three durable boundaries. A run is a real
``OpenMultiAgent().run_tasks(...)``: the timed path is the one a running run takes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    ChatOptions,
    CheckpointOptions,
    FileStore,
    InMemoryStore,
    LLMResponse,
    Message,
    OpenMultiAgent,
    Task,
    Team,
    TextBlock,
    TokenUsage,
    ToolContext,
    ToolUseBlock,
    define_tool,
)
from oma_actors.testing import ScriptedAdapter

RUN_ID = "bench-run"
TASK_ID = "bench-task"
AGENT = "worker"


def write_bytes_now() -> int:
    """``write_bytes`` of this process from /proc/self/io (bytes sent towards the disk)."""
    try:
        with open("/proc/self/io", "rb") as handle:
            for line in handle:
                if line.startswith(b"write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def make_content(i: int, size: int) -> str:
    """``size`` bytes of message content, numbered ``i``."""
    head = f"m{i:07d}:"
    return head + "x" * max(0, size - len(head))


class EchoInput(BaseModel):
    i: int


@dataclass(slots=True)
class Trace:
    """What the scripted model saw: a stamp and write_bytes at each model call."""

    stamps: list[float] = field(default_factory=list)
    io: list[int] = field(default_factory=list)
    messages_at_first_call: int = 0


def bench_agent(
    turns: int,
    payload: int,
    trace: Trace,
    on_call: Callable[[int, Sequence[Message]], None] | None = None,
    max_turns: int | None = None,
) -> AgentConfig:
    """An agent whose model asks for ``turns`` tool calls, then answers; 1 tool result = payload."""

    async def echo(args: EchoInput, ctx: ToolContext) -> str:
        return make_content(args.i, payload)

    tool = define_tool(
        name="echo", description="Echo a payload.", input_model=EchoInput, execute=echo
    )
    usage = TokenUsage(1, 1)

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        trace.stamps.append(time.perf_counter())
        trace.io.append(write_bytes_now())
        n = len(trace.stamps)
        if n == 1:
            trace.messages_at_first_call = len(messages)
        if on_call is not None:
            on_call(n, messages)
        if n <= turns:
            call = ToolUseBlock(f"call-{n}", "echo", {"i": n})
            return LLMResponse([call], stop_reason="tool_use", usage=usage)
        return LLMResponse([TextBlock("done")], usage=usage)

    return AgentConfig(
        AGENT,
        adapter=ScriptedAdapter(script),
        tools=[tool],
        max_turns=max_turns if max_turns is not None else turns + 10,
    )


def bench_task() -> Task:
    """The one task of the workload, assigned to the bench agent."""
    return Task("bench", "Call the echo tool until told to stop.", id=TASK_ID, assignee=AGENT)


@dataclass(slots=True)
class RunResult:
    """One timed run: its total time, turns, per-call trace and write_bytes at the start."""

    total_s: float
    turns: int
    trace: Trace
    io0: int

    @property
    def per_turn(self) -> float:
        return self.total_s / self.turns

    @property
    def intervals(self) -> list[float]:
        """Per-turn times: the gaps between consecutive model calls (``turns`` of them)."""
        return [b - a for a, b in itertools.pairwise(self.trace.stamps[: self.turns + 1])]

    @property
    def cumulative_bytes(self) -> list[int]:
        """write_bytes since the run started, after each of the ``turns`` turns."""
        return [b - self.io0 for b in self.trace.io[1 : self.turns + 1]]


async def run_ours(
    kind: str,
    turns: int,
    payload: int,
    workdir: str,
    *,
    capture_to: str | None = None,
) -> RunResult:
    """One full run: ``kind`` is ``none`` (no checkpoint), ``file`` or ``memory``."""
    trace = Trace()
    path = os.path.join(workdir, f"run-{kind}.json")
    remove_quietly(path)
    on_call = None
    if capture_to is not None:
        # The call after the last tool turn: the store holds the run at its last boundary.
        def on_call(n: int, messages: Sequence[Message]) -> None:
            if n == turns + 1:
                shutil.copyfile(path, capture_to)

    agent = bench_agent(turns, payload, trace, on_call)
    team = Team("bench", [agent])
    oma = OpenMultiAgent()
    if kind == "none":
        io0 = write_bytes_now()
        t0 = time.perf_counter()
        result = await oma.run_tasks(team, [bench_task()], checkpoint=False)
        t1 = time.perf_counter()
    elif kind == "memory":
        options = CheckpointOptions(store=InMemoryStore(), run_id=RUN_ID)
        io0 = write_bytes_now()
        t0 = time.perf_counter()
        result = await oma.run_tasks(team, [bench_task()], checkpoint=options)
        t1 = time.perf_counter()
    elif kind == "file":
        async with FileStore.open(path) as store:
            options = CheckpointOptions(store=store, run_id=RUN_ID)
            io0 = write_bytes_now()
            t0 = time.perf_counter()
            result = await oma.run_tasks(team, [bench_task()], checkpoint=options)
            t1 = time.perf_counter()
    else:
        raise ValueError(kind)
    if not result.success or len(trace.stamps) != turns + 1:
        raise RuntimeError(f"bench run {kind} failed: {len(trace.stamps)} model calls")
    remove_quietly(path)
    return RunResult(total_s=t1 - t0, turns=turns, trace=trace, io0=io0)


def remove_quietly(path: str) -> None:
    """Remove ``path`` and its SQLite/temp siblings when they exist."""
    for suffix in ("", "-wal", "-shm", ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)

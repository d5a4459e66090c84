"""Our workload: one task on one agent, a scripted model asking for one tool call per turn.

Each model call asks for one ``echo`` tool call whose result is ``payload`` bytes, so each turn
adds about that much to the conversation and crosses three durable boundaries. A run is a real
``OpenMultiAgent().run_tasks(...)``: the timed path is the one a running run takes.

Kinds of run: ``none`` (``checkpoint=False``), ``file`` (a ``FileStore`` checkpoint alone: OMA's
mode, the whole snapshot per boundary) and ``journal`` (the same ``FileStore`` plus a
``JsonlRunJournal`` with ``flush_interval_ms=0`` in ``durable`` mode: journal-first, D10). Any of
them can carry the append floor, interleaved save by save (``checkpoint_floor``). P1 also runs
``journal-mem`` (``journal`` with its JSONL journal in tmpfs: the journal-first path's CPU and
hops, no disk wait).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from checkpoint_floor import BoundaryProbe, probing
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
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed, ProgressEvent
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN_ID = "bench-run"
TASK_ID = "bench-task"
AGENT = "worker"


def io_now() -> tuple[int, int]:
    """(``wchar``, ``write_bytes``) of this process from /proc/self/io, or (-1, -1).

    ``wchar`` counts the bytes handed to write calls (logical bytes); ``write_bytes`` the bytes
    this process caused to be sent to the block layer (disk bytes: whole pages, so an fsync'd
    append of 2 KiB costs at least one 4 KiB page).
    """
    wchar = disk = -1
    try:
        with open("/proc/self/io", "rb") as handle:
            for line in handle:
                if line.startswith(b"wchar:"):
                    wchar = int(line.split()[1])
                elif line.startswith(b"write_bytes:"):
                    disk = int(line.split()[1])
    except OSError:
        pass
    return wchar, disk


def write_bytes_now() -> int:
    """``write_bytes`` of this process from /proc/self/io (bytes sent towards the disk)."""
    return io_now()[1]


def make_content(i: int, size: int) -> str:
    """``size`` bytes of message content, numbered ``i``."""
    head = f"m{i:07d}:"
    return head + "x" * max(0, size - len(head))


class EchoInput(BaseModel):
    i: int


@dataclass(slots=True)
class Trace:
    """What the scripted model saw: a stamp, write_bytes and wchar at each model call."""

    stamps: list[float] = field(default_factory=list)
    io: list[int] = field(default_factory=list)
    wchar: list[int] = field(default_factory=list)
    messages_at_first_call: int = 0
    side: Callable[[], tuple[int, int]] | None = None
    side_wchar: list[int] = field(default_factory=list)
    side_io: list[int] = field(default_factory=list)
    # (wchar, write_bytes) of the process and of the floor thread once the run has ENDED (its
    # final answer, last snapshots and journal close included); None until then.
    end: tuple[int, int] | None = None
    side_end: tuple[int, int] | None = None

    def sample_end(self) -> None:
        """The bytes once the run is over: the per-call samples stop at the last model call."""
        self.end = io_now()
        if self.side is not None:
            self.side_end = self.side()

    def sample(self) -> None:
        """Stamp the time and the process's bytes (and the floor thread's, when there is one)."""
        self.stamps.append(time.perf_counter())
        wchar, disk = io_now()
        self.io.append(disk)
        self.wchar.append(wchar)
        if self.side is not None:
            wchar, disk = self.side()
            self.side_io.append(disk)
            self.side_wchar.append(wchar)


def bench_agent(
    turns: int,
    payload: int,
    trace: Trace | None,
    on_call: Callable[[int, Sequence[Message]], None] | None = None,
    max_turns: int | None = None,
) -> AgentConfig:
    """An agent whose model asks for ``turns`` tool calls, then answers; 1 tool result = payload.

    ``trace`` stamps every model call (the time and the process's bytes, read from ``/proc``);
    ``None``: no stamps, the calls counted from the conversation (many runs at once, P13).
    """

    async def echo(args: EchoInput, ctx: ToolContext) -> str:
        return make_content(args.i, payload)

    tool = define_tool(
        name="echo", description="Echo a payload.", input_model=EchoInput, execute=echo
    )
    usage = TokenUsage(1, 1)

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if trace is None:
            n = 1 + sum(1 for message in messages if message.role == "assistant")
        else:
            trace.sample()
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
    """One timed run: its total time, turns, per-call trace and /proc/self/io at the start.

    With a floor interleaved (``probe.floor``), the run's own figures leave the floor out: its
    time (``net_total_s``, ``per_turn``, ``intervals``) is the wall time minus the time awaited
    on floor appends, and its bytes are the process's minus the floor thread's. The floor's own
    figures are ``floor_per_turn`` and ``floor_cumulative``.
    """

    total_s: float
    turns: int
    trace: Trace
    io0: int
    wchar0: int = 0
    probe: BoundaryProbe | None = None
    saves: dict[str, int] = field(default_factory=dict)
    side0: tuple[int, int] = (0, 0)

    @property
    def net_total_s(self) -> float:
        """The run's time without the floor appends interleaved in it."""
        return self.total_s - (self.probe.floor_total() if self.probe is not None else 0.0)

    @property
    def per_turn(self) -> float:
        """The run's own time per turn (per step for LangGraph)."""
        return self.net_total_s / self.turns

    @property
    def floor_per_turn(self) -> float:
        """The floor's time per turn over the turns (NaN without a floor).

        The two syscalls' own time, measured in the floor's thread: the hop to that thread
        and back is no part of what durability needs, and counting it made the floor about
        1.3x longer (every ratio against it that much better). The run's own time still has
        the whole awaited floor taken out (``net_total_s``).
        """
        if self.probe is None or self.probe.floor is None:
            return float("nan")
        stamps = self.trace.stamps
        return self.probe.floor_inner_between(stamps[0], stamps[self.turns]) / self.turns

    @property
    def intervals(self) -> list[float]:
        """Per-turn times: the gaps between consecutive model calls, less the floor's time."""
        out = []
        for a, b in itertools.pairwise(self.trace.stamps[: self.turns + 1]):
            out.append(b - a - (self.probe.floor_between(a, b) if self.probe else 0.0))
        return out

    @property
    def cumulative_bytes(self) -> list[int]:
        """write_bytes since the run started, after each of the ``turns`` turns (floor's out)."""
        return self._less_side(self.trace.io, self.io0, self.trace.side_io, self.side0[1])

    @property
    def cumulative_wchar(self) -> list[int]:
        """wchar (logical bytes written) since the run started, after each turn (floor's out)."""
        return self._less_side(self.trace.wchar, self.wchar0, self.trace.side_wchar, self.side0[0])

    @property
    def floor_cumulative(self) -> tuple[list[int], list[int]]:
        """The floor thread's (wchar, write_bytes) since the run started, after each turn."""
        n = self.turns + 1
        return (
            [b - self.side0[0] for b in self.trace.side_wchar[1:n]],
            [b - self.side0[1] for b in self.trace.side_io[1:n]],
        )

    @property
    def total_wchar(self) -> int:
        """Logical bytes of the whole run, its end included (floor's out)."""
        return self._total(0, self.wchar0, self.cumulative_wchar)

    @property
    def total_bytes(self) -> int:
        """Disk bytes of the whole run, its end included (floor's out)."""
        return self._total(1, self.io0, self.cumulative_bytes)

    @property
    def floor_total(self) -> tuple[int, int]:
        """The floor thread's (wchar, write_bytes) over the whole run, its end included."""
        side, wchar, disk = self.trace.side_end, *self.floor_cumulative
        if side is None:
            return (wchar[-1] if wchar else 0, disk[-1] if disk else 0)
        return (side[0] - self.side0[0], side[1] - self.side0[1])

    def _total(self, which: int, start: int, per_turn: list[int]) -> int:
        end = self.trace.end
        if end is None:  # a run that took no end sample (LangGraph's): its last model call
            return per_turn[-1] if per_turn else 0
        side = self.trace.side_end
        floor = side[which] - self.side0[which] if side is not None else 0
        return (end[which] - start) - floor

    def _less_side(self, series: list[int], start: int, side: list[int], side0: int) -> list[int]:
        n = self.turns + 1
        if not side:
            return [b - start for b in series[1:n]]
        return [(b - start) - (f - side0) for b, f in zip(series[1:n], side[1:n], strict=True)]


async def run_ours(
    kind: str,
    turns: int,
    payload: int,
    workdir: str,
    *,
    capture_to: str | None = None,
    probe: BoundaryProbe | None = None,
    durable: bool = True,
) -> RunResult:
    """One full run of ``kind`` (``none``, ``file`` or ``journal``, see the module).

    Args:
        capture_to: copy the run's files at the first model call after the last tool turn (the
            store holds the run at its last boundary): ``<capture_to>.json`` (the FileStore) and,
            for ``journal``, ``<capture_to>.jsonl``.
        probe: time every boundary (and interleave the floor appends of its ``FloorWriter``).
        durable: the journal's mode (``False`` only while journal-first is not available).
    """
    trace = Trace()
    path = os.path.join(workdir, f"run-{kind}.json")
    jpath = journal_file(workdir, kind)
    remove_quietly(path)
    remove_quietly(jpath)
    on_call = None
    if capture_to is not None:

        def on_call(n: int, messages: Sequence[Message]) -> None:
            if n == turns + 1:
                shutil.copyfile(path, capture_to + ".json")
                if kind == "journal":
                    shutil.copyfile(jpath, capture_to + ".jsonl")

    agent = bench_agent(turns, payload, trace, on_call)
    team = Team("bench", [agent])
    saves: dict[str, int] = {}

    def count(event: ProgressEvent) -> None:
        # CheckpointSaved.mode: "snapshot" (compaction / OMA's save) or "journal" (D10).
        if isinstance(event, CheckpointSaved):
            mode = getattr(event, "mode", "snapshot")
            saves[mode] = saves.get(mode, 0) + 1
        elif isinstance(event, CheckpointSaveFailed):
            saves["failed"] = saves.get("failed", 0) + 1

    oma = OpenMultiAgent(on_progress=count)
    async with contextlib.AsyncExitStack() as stack:
        checkpoint: CheckpointOptions | bool = False
        journal: JournalOptions | None = None
        if kind in ("file", "journal", "journal-mem", "memory"):
            store = (
                InMemoryStore()
                if kind == "memory"
                else await stack.enter_async_context(FileStore.open(path))
            )
            checkpoint = CheckpointOptions(store=store, run_id=RUN_ID)
        elif kind != "none":
            raise ValueError(kind)
        if kind == "journal":
            backend = JsonlRunJournal(jpath, flush_interval_ms=0)
            stack.push_async_callback(backend.close)
            journal = JournalOptions(backend, durable=durable)
        elif kind == "journal-mem":  # diagnostic: the journal path's CPU and hops, no fsync
            # The same save path as ``journal`` (an InMemoryRunJournal is refused as one: it
            # forgets what the store keeps), in tmpfs where an fsync waits for no disk.
            backend = JsonlRunJournal(memory_journal_file(kind), flush_interval_ms=0)
            stack.push_async_callback(backend.close)
            stack.callback(remove_quietly, memory_journal_file(kind))
            journal = JournalOptions(backend, durable=durable)
        if probe is not None and probe.floor is not None:
            trace.side = probe.floor.io
        side0 = trace.side() if trace.side is not None else (0, 0)
        with probing(probe):
            wchar0, io0 = io_now()
            t0 = time.perf_counter()
            result = await oma.run_tasks(
                team, [bench_task()], checkpoint=checkpoint, journal=journal
            )
            t1 = time.perf_counter()
    # After the journal's close and the store's: the run's last bytes count too (P3).
    trace.sample_end()
    if not result.success or len(trace.stamps) != turns + 1 or saves.get("failed"):
        raise RuntimeError(
            f"bench run {kind} failed: {len(trace.stamps)} model calls, saves {saves}"
        )
    remove_quietly(path)
    remove_quietly(jpath)
    return RunResult(
        total_s=t1 - t0,
        turns=turns,
        trace=trace,
        io0=io0,
        wchar0=wchar0,
        probe=probe,
        saves=saves,
        side0=side0,
    )


def memory_journal_file(kind: str) -> str:
    """Where the ``journal-mem`` diagnostic keeps its journal: tmpfs when there is one."""
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, f"oma-bench-{os.getpid()}-{kind}.jsonl")


def journal_file(workdir: str, kind: str) -> str:
    """The journal file a run of ``kind`` writes in ``workdir``."""
    return os.path.join(workdir, f"run-{kind}.jsonl")


def remove_quietly(path: str) -> None:
    """Remove ``path`` and its SQLite/temp siblings when they exist."""
    for suffix in ("", "-wal", "-shm", ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)

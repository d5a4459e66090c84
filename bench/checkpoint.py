"""BENCH.md P1-P6: what checkpointing costs, side by side with its floors and with LangGraph.

Every figure is a ratio of two things measured in the same run. Repeats are interleaved (the
order of the variants rotates from one repeat to the next) and each table reports the median
over the repeats. Differences under 1.3x are noise on these shared machines; a verdict that close
to its goal is marked as such.

The workload is a real ``OpenMultiAgent().run_tasks`` of one task on one agent with a
zero-latency ``ScriptedAdapter``: every model call asks for one ``echo`` tool call, whose result
is ``--payload`` bytes (1 KiB), so every agent turn appends about 1 KiB to the conversation and
crosses three durable boundaries (assistant tool turn, tool commit, tool results). The LangGraph
anchor is the graph of ``shared/bench/langgraph_bench.py`` (``channel=add``: a model node and a
tool node, each appending one 1 KiB message per step), copied here so this script runs anywhere.

* P1 one durable save of a real snapshot of that run (1, 16, 64 KiB), ``Checkpoint.save`` on a
  ``FileStore`` and an ``InMemoryStore``, vs the floor: the same bytes the FileStore wrote, to a
  temp file + fsync + rename + directory fsync with plain ``os`` calls in a worker thread; and vs
  LangGraph SqliteSaver's time added per step on a run that stays under 64 KiB.
* P2 time added per agent turn by checkpointing on a FileStore (300 turns) vs LangGraph
  SqliteSaver's time added per two steps (300 x 1 KiB).
* P3 bytes written (``/proc/self/io`` ``write_bytes``, not file sizes) over 1000 turns, and the
  growth exponent of cumulative bytes vs turns. FileStore rewrites its whole file on every save,
  so it is expected to be quadratic and to miss P3.
* P4 per-turn cost drift, median of the last decile / median of the first, same 1000-turn run.
* P5 restore of that run in a fresh process: from after import to the first resumed model call.
* P6 ``import oma_actors``: ``python -X importtime`` and a fresh interpreter's wall time vs
  ``python -c pass``.

LangGraph is optional (``pip install -r bench/requirements.txt``); without it the LangGraph
column is skipped and says so.

Run: ``.venv/bin/python bench/checkpoint.py [--quick] [--json PATH] [--only P1,P3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.metadata
import itertools
import json
import math
import operator
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    ChatOptions,
    Checkpoint,
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
from oma_actors.actors import event_loop_factory
from oma_actors.checkpoint import CheckpointSnapshot, decode, encode
from oma_actors.testing import ScriptedAdapter

NOISE = 1.3
KIB = 1024
MIB = 1024 * 1024
GOALS = {
    "P1_floor": 1.5,  # FileStore save / floor, at most
    "P1_langgraph": 1 / 3,  # our save / LangGraph's added time per step, at most
    "P2": 1 / 3,  # our added time per turn / LangGraph's two steps, at most
    "P3_bytes": 5 * MIB,  # bytes written over 1000 turns, at most
    "P3_exponent": 1.2,  # growth exponent, at most
    "P4": 1.2,  # last decile / first decile, at most
    "P5": 0.010,  # seconds from after import to the first resumed model call, at most
    "P6": 0.3,  # seconds of `import oma_actors`, at most
}
RUN_ID = "bench-run"
TASK_ID = "bench-task"
AGENT = "worker"


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


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


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def drift(intervals: Sequence[float]) -> float:
    """Median of the last decile of ``intervals`` / median of the first decile."""
    dec = max(1, len(intervals) // 10)
    return median(intervals[-dec:]) / median(intervals[:dec])


def growth_exponent(cum: Sequence[int]) -> float:
    """Slope of log(cumulative bytes) vs log(step) over the upper 90% of steps (as the anchor)."""
    n = len(cum)
    pts = [
        (math.log(i + 1), math.log(c))
        for i, c in enumerate(cum)
        if i + 1 >= max(2, n // 10) and c > 0
    ]
    if len(pts) < 3:
        return math.nan
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    num = sum((x - mx) * (y - my) for x, y in pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return num / den if den else math.nan


def fmt_time(seconds: float) -> str:
    if math.isnan(seconds):
        return "n/a"
    if abs(seconds) >= 1.0:
        return f"{seconds:.2f} s"
    if abs(seconds) >= 0.01:
        return f"{seconds * 1e3:.1f} ms"
    if abs(seconds) >= 0.001:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} us"


def fmt_bytes(n: float) -> str:
    if n < 0 or math.isnan(n):
        return "n/a"
    for unit, size in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def fmt_ratio(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.2f}x"


def verdict(value: float, goal: float, *, at_most: bool = True) -> str:
    """PASS or MISS against ``goal``; flags results within the 1.3x noise band of the goal."""
    if math.isnan(value):
        return "n/a"
    ok = value <= goal if at_most else value >= goal
    word = "PASS" if ok else "MISS"
    if value > 0 and goal > 0 and max(value / goal, goal / value) < NOISE:
        word += " (within 1.3x noise of the goal)"
    return word


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (so the output can be pasted into bench/README.md as is)."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    return "\n".join([line, sep, *body])


def rotated(names: Sequence[str], repeat: int) -> list[str]:
    """``names`` rotated by ``repeat`` so no variant always runs first in a repeat."""
    shift = repeat % len(names)
    return list(names[shift:]) + list(names[:shift])


def make_content(i: int, size: int) -> str:
    head = f"m{i:07d}:"
    return head + "x" * max(0, size - len(head))


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def noise_probe(reps: int = 30) -> dict[str, float]:
    """The anchor's fixed pure-Python loop; its CV shows how noisy the machine is right now."""
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        x = 0
        for i in range(200_000):
            x += i
        ts.append(time.perf_counter() - t0)
    return {
        "median_ms": median(ts) * 1e3,
        "cv": statistics.pstdev(ts) / statistics.fmean(ts),
    }


def git_revision() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        rev = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "oma_actors"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + (" (oma_actors/ has uncommitted changes)" if dirty else "")


def langgraph_versions() -> dict[str, str] | None:
    """Installed LangGraph packages, or ``None`` when the anchor cannot run here."""
    out = {}
    for pkg in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return None
    return out


# --------------------------------------------------------------------------------------------
# our workload: one task, one agent, a scripted model asking for one tool call per turn
# --------------------------------------------------------------------------------------------


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
    return Task("bench", "Call the echo tool until told to stop.", id=TASK_ID, assignee=AGENT)


@dataclass(slots=True)
class RunResult:
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
    for suffix in ("", "-wal", "-shm", ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


# --------------------------------------------------------------------------------------------
# P1 pieces: real snapshots, one save, and the floor
# --------------------------------------------------------------------------------------------


class RecordingStore(InMemoryStore):
    """An InMemoryStore that keeps every value written (to pick real snapshots by size)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[str] = []

    async def set(self, key: str, value: str, metadata: Any = None) -> None:
        self.written.append(value)
        await super().set(key, value, metadata)


async def real_snapshots(targets: Sequence[int], payload: int) -> dict[int, CheckpointSnapshot]:
    """Run the workload on a recording store; for each target size the closest real snapshot."""
    store = RecordingStore()
    turns = max(targets) // payload + 8
    agent = bench_agent(turns, payload, Trace())
    options = CheckpointOptions(store=store, run_id=RUN_ID)
    await OpenMultiAgent().run_tasks(Team("bench", [agent]), [bench_task()], checkpoint=options)
    out = {}
    for target in targets:
        text = min(store.written, key=lambda t: abs(len(t.encode()) - target))
        out[target] = decode(text, key="bench")
    return out


async def time_saves(kind: str, snapshot: CheckpointSnapshot, n: int, path: str) -> list[float]:
    """Seconds of ``n`` consecutive ``Checkpoint.save`` calls of ``snapshot``."""
    ts = []
    if kind == "file":
        async with FileStore.open(path) as store:
            cp = Checkpoint(store, run_id=RUN_ID)
            await cp.save(snapshot)  # warm: the file exists, as in a running run
            for _ in range(n):
                t0 = time.perf_counter()
                await cp.save(snapshot)
                ts.append(time.perf_counter() - t0)
    else:
        cp = Checkpoint(InMemoryStore(), run_id=RUN_ID)
        await cp.save(snapshot)
        for _ in range(n):
            t0 = time.perf_counter()
            await cp.save(snapshot)
            ts.append(time.perf_counter() - t0)
    return ts


async def file_bytes_of_save(snapshot: CheckpointSnapshot, path: str) -> bytes:
    """The exact bytes a FileStore holding only this checkpoint writes on each save."""
    remove_quietly(path)
    async with FileStore.open(path) as store:
        await Checkpoint(store, run_id=RUN_ID).save(snapshot)
    data = read_file(path)
    remove_quietly(path)
    return data


def read_file(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def floor_write(path: str, data: bytes, dir_fd: int) -> None:
    """Temp file + write + fsync + rename + directory fsync, with plain os calls."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    os.fsync(dir_fd)


async def time_floor(data: bytes, n: int, path: str) -> list[float]:
    """Seconds of ``n`` floor writes, each run in a worker thread and awaited from the loop."""
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        await asyncio.to_thread(floor_write, path, data, dir_fd)
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            await asyncio.to_thread(floor_write, path, data, dir_fd)
            ts.append(time.perf_counter() - t0)
    finally:
        os.close(dir_fd)
    return ts


# --------------------------------------------------------------------------------------------
# the LangGraph anchor (a copy of shared/bench/langgraph_bench.py's graph, channel=add, sync)
# --------------------------------------------------------------------------------------------

LG_STAMPS: list[float] = []
LG_IO: list[int] = []
LG_CRASH_AT: int | None = None
LG_ON_FIRST: Callable[[dict[str, Any]], None] | None = None


def lg_builder(payload: int) -> Any:
    from typing import Annotated, TypedDict

    from langgraph.graph import END, START, StateGraph

    msg_list = Annotated[list, operator.add]
    # The functional form, as in the anchor: annotations are evaluated here, not as strings.
    fields = {"messages": msg_list, "step": int, "limit": int}
    state_type = TypedDict("State", fields)  # type: ignore[misc]

    def body(role: str, state: dict[str, Any]) -> dict[str, Any]:
        LG_STAMPS.append(time.perf_counter())
        LG_IO.append(write_bytes_now())
        i = state["step"]
        if LG_CRASH_AT is not None and i == LG_CRASH_AT:
            os._exit(0)  # simulated crash: no cleanup, no flush
        if LG_ON_FIRST is not None:
            LG_ON_FIRST(state)
        msg = {"kind": role, "id": i, "content": make_content(i, payload)}
        return {"messages": [msg], "step": i + 1}

    def model(state: dict[str, Any]) -> dict[str, Any]:
        return body("assistant", state)

    def tool(state: dict[str, Any]) -> dict[str, Any]:
        return body("tool", state)

    def after_model(state: dict[str, Any]) -> str:
        return "tool" if state["step"] < state["limit"] else END

    def after_tool(state: dict[str, Any]) -> str:
        return "model" if state["step"] < state["limit"] else END

    b = StateGraph(state_type)
    b.add_node("model", model)
    b.add_node("tool", tool)
    b.add_edge(START, "model")
    b.add_conditional_edges("model", after_model, ["tool", END])
    b.add_conditional_edges("tool", after_tool, ["model", END])
    return b


def lg_config(steps: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": "bench"}, "recursion_limit": steps + 50}


def run_langgraph(mode: str, steps: int, payload: int, workdir: str) -> RunResult:
    """One anchor run: ``none`` or ``sqlite`` (SqliteSaver on a file, durability="sync")."""
    builder = lg_builder(payload)
    inp = {"messages": [], "step": 0, "limit": steps}
    cfg = lg_config(steps)
    LG_STAMPS.clear()
    LG_IO.clear()
    db = os.path.join(workdir, "langgraph.sqlite")
    remove_quietly(db)
    if mode == "none":
        g = builder.compile()
        io0 = write_bytes_now()
        t0 = time.perf_counter()
        out = g.invoke(inp, cfg)
        t1 = time.perf_counter()
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(db) as saver:
            g = builder.compile(checkpointer=saver)
            saver.setup()
            io0 = write_bytes_now()
            t0 = time.perf_counter()
            out = g.invoke(inp, cfg, durability="sync")
            t1 = time.perf_counter()
    remove_quietly(db)
    if len(out["messages"]) != steps:
        raise RuntimeError(f"langgraph run {mode}: {len(out['messages'])} messages")
    # Reuse RunResult: a "turn" is one LangGraph step here; stamps are node entries.
    trace = Trace(stamps=[*LG_STAMPS, t1], io=[*LG_IO, write_bytes_now()])
    return RunResult(total_s=t1 - t0, turns=steps, trace=trace, io0=io0)


def median_interval(r: RunResult) -> float:
    return median(r.intervals)


# --------------------------------------------------------------------------------------------
# child processes (P5)
# --------------------------------------------------------------------------------------------


def child_restore(args: argparse.Namespace) -> None:
    """Restore the captured run; print seconds from here (after import) to the first model call."""
    t0 = time.perf_counter()
    trace = Trace()

    def on_first(n: int, messages: Sequence[Message]) -> None:
        t1 = time.perf_counter()
        out = {"seconds": t1 - t0, "messages": len(messages)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        os._exit(0)

    async def go() -> None:
        agent = bench_agent(1, args.payload, trace, on_first, max_turns=args.turns + 10)
        store = FileStore(args.store)
        options = CheckpointOptions(store=store, run_id=RUN_ID)
        await OpenMultiAgent().restore(Team("bench", [agent]), checkpoint=options)

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(go())
    sys.stdout.write(json.dumps({"error": "the restored run made no model call"}) + "\n")


def child_load(args: argparse.Namespace) -> None:
    """Only open the FileStore and load + decode the snapshot (a part of child_restore)."""
    t0 = time.perf_counter()

    async def go() -> CheckpointSnapshot | None:
        async with FileStore.open(args.store) as store:
            return await Checkpoint(store, run_id=RUN_ID).load_latest()

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        snapshot = runner.run(go())
    t1 = time.perf_counter()
    n = len(snapshot.in_flight[0].state.conversation) if snapshot and snapshot.in_flight else 0
    print(json.dumps({"seconds": t1 - t0, "messages": n}))


def child_lg_crash(args: argparse.Namespace) -> None:
    global LG_CRASH_AT
    from langgraph.checkpoint.sqlite import SqliteSaver

    LG_CRASH_AT = args.turns
    builder = lg_builder(args.payload)
    limit = args.turns + 4
    with SqliteSaver.from_conn_string(args.store) as saver:
        g = builder.compile(checkpointer=saver)
        g.invoke({"messages": [], "step": 0, "limit": limit}, lg_config(limit), durability="sync")
    print(json.dumps({"error": "did not crash"}))


def child_lg_resume(args: argparse.Namespace) -> None:
    """Resume the crashed anchor run; seconds from after import to the first resumed node."""
    global LG_ON_FIRST
    import langgraph.graph  # noqa: F401  (the import is not timed, as for ours)
    from langgraph.checkpoint.sqlite import SqliteSaver

    t0 = time.perf_counter()

    def on_first(state: dict[str, Any]) -> None:
        t1 = time.perf_counter()
        sys.stdout.write(json.dumps({"seconds": t1 - t0, "messages": len(state["messages"])}))
        sys.stdout.write("\n")
        sys.stdout.flush()
        os._exit(0)

    LG_ON_FIRST = on_first
    builder = lg_builder(args.payload)
    with SqliteSaver.from_conn_string(args.store) as saver:
        g = builder.compile(checkpointer=saver)
        g.invoke(None, lg_config(args.turns + 4), durability="sync")
    print(json.dumps({"error": "the resumed run ran no node"}))


def run_child(mode: str, store: str, turns: int, payload: int) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", mode, "--_store", store]
    cmd += ["--_turns", str(turns), "--_payload", str(payload)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = p.stdout.strip().splitlines()
    if mode == "lg-crash" and p.returncode == 0 and not lines:
        return {}  # it died at the crash step, as it should
    if p.returncode != 0 or not lines:
        return {"error": f"{mode}: rc={p.returncode} {p.stderr[-600:]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def copy_db(src: str, dst: str) -> None:
    remove_quietly(dst)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, dst + suffix)


# --------------------------------------------------------------------------------------------
# P6: import time
# --------------------------------------------------------------------------------------------

IMPORTTIME = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def importtime(module: str) -> tuple[float, list[tuple[int, str]]]:
    """Cumulative seconds of ``module`` under -X importtime, and the heaviest direct imports."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [m for m in map(IMPORTTIME.match, p.stderr.splitlines()) if m]
    total = 0
    top: list[tuple[int, str]] = []
    base_indent = None
    for m in rows:
        if m.group(4) == module:
            total = int(m.group(2))
            base_indent = len(m.group(3))
    if base_indent is not None:
        for m in rows:
            if len(m.group(3)) == base_indent + 2:  # imported directly by the top module
                top.append((int(m.group(2)), m.group(4)))
    top.sort(reverse=True)
    return total / 1e6, top[:6]


def wall(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# the benchmark
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Settings:
    quick: bool
    repeats: int
    payload: int
    p1_sizes: tuple[int, ...]
    p1_saves: int
    p1_repeats: int
    p1_lg_steps: int
    p2_turns: int
    long_turns: int
    child_repeats: int
    import_repeats: int
    langgraph: bool
    workdir: str
    lg_skipped: str = "not installed (pip install -r bench/requirements.txt)"


class Bench:
    def __init__(self, s: Settings, runner: asyncio.Runner) -> None:
        self.s = s
        self.runner = runner
        self.results: dict[str, Any] = {}
        self.restore_source: str | None = None

    def header(self, lg: dict[str, str] | None) -> None:
        s = self.s
        probe = noise_probe()
        fs = subprocess.run(
            ["stat", "-f", "-c", "%T", s.workdir], capture_output=True, text=True, check=False
        ).stdout.strip()
        loop = type(self.runner.get_loop()).__module__.split(".")[0]
        lines = [
            "# oma-actors checkpoint benchmark (BENCH.md P1-P6)",
            f"# date      {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
            f"# python    {sys.version.split()[0]} on {platform.platform()}, event loop: {loop}",
            f"# cpus      {os.cpu_count()}  loadavg(before) {loadavg()}",
            f"# revision  {git_revision()}",
            f"# langgraph {lg if lg else 'LangGraph columns skipped: ' + s.lg_skipped}",
            f"# workdir   {s.workdir} (fs: {fs or 'unknown'})",
            f"# settings  {'--quick ' if s.quick else ''}repeats={s.repeats} payload={s.payload}B"
            f" P2 turns={s.p2_turns} P3/P4/P5 turns={s.long_turns}",
            f"# noise     fixed loop median {probe['median_ms']:.2f} ms,"
            f" CV {probe['cv'] * 100:.1f}% (differences under {NOISE}x are noise)",
        ]
        print("\n".join(lines), flush=True)
        self.results["meta"] = {
            "settings": {k: getattr(s, k) for k in s.__slots__},
            "langgraph": lg,
            "noise": probe,
            "revision": git_revision(),
            "loop": loop,
        }

    def gc_run(self, fn: Callable[[], Any]) -> Any:
        gc.collect()
        return fn()

    # ---------------------------------------------------------------- P1

    def p1(self) -> None:
        s = self.s
        snaps = self.runner.run(real_snapshots(s.p1_sizes, s.payload))
        path = os.path.join(s.workdir, "p1.json")
        data = {
            size: self.runner.run(file_bytes_of_save(snap, path)) for size, snap in snaps.items()
        }
        samples: dict[tuple[int, str], list[float]] = {}
        lg_samples: dict[str, list[float]] = {"none": [], "sqlite": []}
        p1_repeats = s.p1_repeats
        for rep in range(p1_repeats):
            # Ours and the floor alternate block by block at each size; LangGraph once a repeat.
            for i, size in enumerate(s.p1_sizes):
                for name in rotated(["file", "memory", "floor"], rep + i):
                    if name == "floor":
                        coro = time_floor(data[size], s.p1_saves, path)
                    else:
                        coro = time_saves(name, snaps[size], s.p1_saves, path)
                    gc.collect()
                    ts = self.runner.run(coro)
                    samples.setdefault((size, name), []).append(median(ts))
            if s.langgraph:
                for mode in rotated(["none", "sqlite"], rep):
                    r = self.gc_run(
                        lambda m=mode: run_langgraph(m, s.p1_lg_steps, s.payload, s.workdir)
                    )
                    lg_samples[mode].append(median_interval(r))
        remove_quietly(path)
        rows = []
        res: dict[str, Any] = {"sizes": {}}
        worst = 0.0
        for size in s.p1_sizes:
            floor = median(samples[(size, "floor")])
            ours = median(samples[(size, "file")])
            mem = median(samples[(size, "memory")])
            ratio = ours / floor
            worst = max(worst, ratio)
            snap_bytes = len(encode(snaps[size]).encode())
            res["sizes"][size] = {
                "snapshot_bytes": snap_bytes,
                "file_bytes": len(data[size]),
                "floor_s": floor,
                "filestore_s": ours,
                "memory_s": mem,
                "filestore_over_floor": ratio,
                "repeats": {k[1]: v for k, v in samples.items() if k[0] == size},
            }
            rows.append(
                [
                    fmt_bytes(size),
                    fmt_bytes(snap_bytes),
                    fmt_bytes(len(data[size])),
                    fmt_time(floor),
                    fmt_time(ours),
                    fmt_ratio(ratio),
                    fmt_time(mem),
                    fmt_ratio(mem / floor),
                    verdict(ratio, GOALS["P1_floor"]),
                ]
            )
        print(
            "\n## P1 per durable boundary, small state: one Checkpoint.save of a real snapshot"
            f" (goal: FileStore <= {GOALS['P1_floor']}x the floor; >= 3x lower than LangGraph"
            " SqliteSaver per step)"
        )
        print(
            f"median of {p1_repeats} interleaved repeats, each the median of {s.p1_saves} saves;"
            " floor = the same file bytes to temp + fsync + rename + dir fsync, plain os calls"
            " in a worker thread (InMemoryStore is not durable: shown for its CPU cost only)\n"
        )
        headers = ["state", "snapshot", "file bytes", "floor", "FileStore save", "x floor"]
        headers += ["InMemoryStore save", "x floor", "verdict"]
        print(table(headers, rows))
        res["worst_filestore_over_floor"] = worst
        if s.langgraph:
            none, sqlite = median(lg_samples["none"]), median(lg_samples["sqlite"])
            added = sqlite - none
            res["langgraph"] = {
                "steps": s.p1_lg_steps,
                "per_step_none_s": none,
                "per_step_sqlite_s": sqlite,
                "added_per_step_s": added,
                "ours_over_langgraph": {
                    size: res["sizes"][size]["filestore_s"] / added for size in s.p1_sizes
                },
                "repeats": lg_samples,
            }
            print(
                f"\nLangGraph SqliteSaver (durability=sync), the anchor graph run for"
                f" {s.p1_lg_steps} steps x {fmt_bytes(s.payload)} so its state stays <= 64 KiB:"
                f" median step {fmt_time(sqlite)} vs {fmt_time(none)} without a checkpointer,"
                f" so {fmt_time(added)} added per step (goal: ours <= 1/3 of it)\n"
            )
            rows = []
            for size in s.p1_sizes:
                ours = res["sizes"][size]["filestore_s"]
                ratio = ours / added
                rows.append(
                    [
                        fmt_bytes(size),
                        fmt_time(ours),
                        fmt_time(added),
                        fmt_ratio(ratio),
                        verdict(ratio, GOALS["P1_langgraph"]),
                    ]
                )
            headers = ["state", "FileStore save", "LangGraph added per step", "ours / LangGraph"]
            print(table([*headers, "verdict"], rows))
        else:
            print(f"\nLangGraph column skipped: {s.lg_skipped}")
        self.results["P1"] = res

    # ---------------------------------------------------------------- P2

    def p2(self) -> None:
        s = self.s
        n = s.p2_turns
        ours: dict[str, list[float]] = {"none": [], "file": [], "memory": []}
        lg: dict[str, list[float]] = {"none": [], "sqlite": []}
        variants = ["ours:none", "ours:file", "ours:memory"]
        variants += ["lg:none", "lg:sqlite"] if s.langgraph else []
        for rep in range(s.repeats):
            for name in rotated(variants, rep):
                side, kind = name.split(":")
                if side == "ours":
                    gc.collect()
                    r = self.runner.run(run_ours(kind, n, s.payload, s.workdir))
                    ours[kind].append(r.per_turn)
                else:
                    r = self.gc_run(lambda k=kind: run_langgraph(k, n, s.payload, s.workdir))
                    lg[kind].append(r.per_turn)
        base = median(ours["none"])
        added = median(ours["file"]) - base
        added_mem = median(ours["memory"]) - base
        res: dict[str, Any] = {
            "turns": n,
            "ours_per_turn_s": {k: median(v) for k, v in ours.items()},
            "ours_added_per_turn_s": added,
            "ours_added_per_turn_memory_s": added_mem,
            "repeats": {"ours": ours, "langgraph": lg},
        }
        print(
            f"\n## P2 per agent turn (model + one tool = 3 durable boundaries), {n} turns x"
            f" ~{fmt_bytes(s.payload)} (goal: <= 1/3 of LangGraph SqliteSaver's two steps)"
        )
        print(
            f"median of {s.repeats} interleaved repeats of whole runs; per turn = run time / turns;"
            " added = with checkpoint - without\n"
        )
        rows = [
            ["ours, no checkpoint", fmt_time(base), "-", "-", "-"],
            ["ours, FileStore", fmt_time(median(ours["file"])), fmt_time(added), "", ""],
            [
                "ours, InMemoryStore (not durable)",
                fmt_time(median(ours["memory"])),
                fmt_time(added_mem),
                "",
                "",
            ],
        ]
        if s.langgraph:
            lg_none, lg_sqlite = median(lg["none"]), median(lg["sqlite"])
            two = 2 * (lg_sqlite - lg_none)
            ratio = added / two
            res["langgraph"] = {
                "per_step_none_s": lg_none,
                "per_step_sqlite_s": lg_sqlite,
                "added_two_steps_s": two,
                "ours_over_langgraph": ratio,
            }
            rows[1][3:] = [fmt_ratio(ratio), verdict(ratio, GOALS["P2"])]
            rows[2][3] = fmt_ratio(added_mem / two)
            rows.append(
                [
                    f"LangGraph, no checkpointer, 2 steps ({n} x {fmt_bytes(s.payload)})",
                    fmt_time(2 * lg_none),
                    "-",
                    "-",
                    "-",
                ]
            )
            rows.append(
                [
                    "LangGraph, SqliteSaver sync, 2 steps",
                    fmt_time(2 * lg_sqlite),
                    fmt_time(two),
                    "1.00x",
                    "(anchor)",
                ]
            )
        else:
            rows[1][3:] = ["n/a", f"LangGraph column skipped: {s.lg_skipped}"]
        headers = ["variant", "per turn", "added per turn", "ours / LangGraph", "verdict"]
        print(table(headers, rows))
        self.results["P2"] = res

    # ---------------------------------------------------------------- P3 + P4

    def p3_p4(self) -> None:
        s = self.s
        n = s.long_turns
        capture = os.path.join(s.workdir, "restore-source.json")
        runs: dict[str, list[RunResult]] = {"file": [], "none": [], "lg:none": [], "lg:sqlite": []}
        variants = ["file", "none"] + (["lg:none", "lg:sqlite"] if s.langgraph else [])
        for rep in range(s.repeats):
            for name in rotated(variants, rep):
                if name.startswith("lg:"):
                    kind = name[3:]
                    r = self.gc_run(lambda k=kind: run_langgraph(k, n, s.payload, s.workdir))
                else:
                    cap = capture if name == "file" and self.restore_source is None else None
                    gc.collect()
                    r = self.runner.run(run_ours(name, n, s.payload, s.workdir, capture_to=cap))
                    if cap is not None:
                        self.restore_source = cap
                runs[name].append(r)
                print(f"#   {name:9s} repeat {rep + 1}: {fmt_time(r.total_s)}", flush=True)
        marks = sorted({max(1, n // 10), max(1, (3 * n) // 10), n})

        def byte_stats(rs: list[RunResult]) -> dict[str, Any]:
            cums = [r.cumulative_bytes for r in rs]
            at = {m: median([c[m - 1] for c in cums]) for m in marks}
            return {
                "total": median([c[-1] for c in cums]),
                "at": at,
                "exponent": median([growth_exponent(c) for c in cums]),
                "pairwise_exponent": math.log(at[n] / at[marks[0]]) / math.log(n / marks[0])
                if at[marks[0]] > 0 and at[n] > 0
                else math.nan,
            }

        ours_b = byte_stats(runs["file"])
        res3: dict[str, Any] = {"turns": n, "filestore": ours_b}
        print(
            f"\n## P3 bytes written over {n} turns x ~{fmt_bytes(s.payload)}, /proc/self/io"
            f" write_bytes (goal: <= {fmt_bytes(GOALS['P3_bytes'])}"
            f" over 1000 turns, growth exponent <= {GOALS['P3_exponent']})"
        )
        print(
            "FileStore rewrites its whole JSON file on every save, so the bytes per save grow with"
            " the conversation and the total is quadratic: it is expected to miss P3 (BENCH.md)."
            f" Median of {s.repeats} repeats.\n"
        )
        headers = ["variant", *[f"after {m}" for m in marks], "exponent (fit)", "verdict"]
        content = n * s.payload
        rows = [
            [
                "ours, FileStore",
                *[fmt_bytes(ours_b["at"][m]) for m in marks],
                f"{ours_b['exponent']:.2f} ({marks[0]}->{n}: {ours_b['pairwise_exponent']:.2f})",
                f"bytes: {verdict(ours_b['total'], GOALS['P3_bytes'])}; growth:"
                f" {verdict(ours_b['exponent'], GOALS['P3_exponent'])}",
            ]
        ]
        if s.langgraph:
            lg_b = byte_stats(runs["lg:sqlite"])
            res3["langgraph"] = lg_b
            rows.append(
                [
                    "LangGraph SqliteSaver sync (steps)",
                    *[fmt_bytes(lg_b["at"][m]) for m in marks],
                    f"{lg_b['exponent']:.2f} ({marks[0]}->{n}: {lg_b['pairwise_exponent']:.2f})",
                    f"ours / LangGraph = {fmt_ratio(ours_b['total'] / lg_b['total'])}",
                ]
            )
        print(table(headers, rows))
        print(
            f"\nmessage content after {n} turns: {fmt_bytes(content)}; FileStore wrote"
            f" {ours_b['total'] / content:.0f}x that."
            + (" (--quick: scaled run, the byte goal is for 1000 turns)" if n != 1000 else "")
        )
        self.results["P3"] = res3

        res4: dict[str, Any] = {"turns": n}
        print(
            f"\n## P4 per-turn cost drift over {n} turns, median of last decile / median of first"
            f" decile (goal: <= {GOALS['P4']}x)\n"
        )
        rows = []
        for key, label in (
            ("file", "ours, FileStore (per turn = 3 saves)"),
            ("none", "ours, no checkpoint"),
            ("lg:sqlite", "LangGraph SqliteSaver sync (per step)"),
            ("lg:none", "LangGraph, no checkpointer (per step)"),
        ):
            rs = runs[key]
            if not rs:
                continue
            first = median([median(r.intervals[: max(1, n // 10)]) for r in rs])
            last = median([median(r.intervals[-max(1, n // 10) :]) for r in rs])
            d = median([drift(r.intervals) for r in rs])
            res4[key] = {"first_decile_s": first, "last_decile_s": last, "drift": d}
            check = verdict(d, GOALS["P4"]) if key == "file" else ""
            rows.append([label, fmt_time(first), fmt_time(last), fmt_ratio(d), check])
        if not s.langgraph:
            rows.append(["LangGraph", f"skipped: {s.lg_skipped}", "", "", ""])
        print(table(["variant", "first decile", "last decile", "drift", "verdict"], rows))
        self.results["P4"] = res4

    # ---------------------------------------------------------------- P5

    def p5(self) -> None:
        s = self.s
        n = s.long_turns
        if self.restore_source is None:  # P3 did not run: capture a run of its own
            capture = os.path.join(s.workdir, "restore-source.json")
            self.runner.run(run_ours("file", n, s.payload, s.workdir, capture_to=capture))
            self.restore_source = capture
        src = self.restore_source
        work = os.path.join(s.workdir, "restore-copy.json")
        lg_src = os.path.join(s.workdir, "lg-crashed.sqlite")
        lg_work = os.path.join(s.workdir, "lg-resume.sqlite")
        if s.langgraph:
            remove_quietly(lg_src)
            crash = run_child("lg-crash", lg_src, n, s.payload)
            if crash.get("error"):
                print(f"# LangGraph crash child failed: {crash['error']}")
        samples: dict[str, list[dict[str, Any]]] = {"restore": [], "load": [], "lg": []}
        variants = ["restore", "load"] + (["lg"] if s.langgraph else [])
        for rep in range(s.child_repeats):
            for name in rotated(variants, rep):
                if name == "lg":
                    copy_db(lg_src, lg_work)
                    out = run_child("lg-resume", lg_work, n, s.payload)
                else:
                    shutil.copyfile(src, work)  # restore writes: every child gets a fresh copy
                    out = run_child(name, work, n, s.payload)
                if out.get("error"):
                    print(f"# P5 child {name} failed: {out['error']}")
                    continue
                samples[name].append(out)
        remove_quietly(work)
        remove_quietly(lg_work)
        remove_quietly(lg_src)

        def med(name: str) -> float:
            return median([o["seconds"] for o in samples[name]])

        restore = med("restore")
        res: dict[str, Any] = {
            "turns": n,
            "store_bytes": os.path.getsize(src),
            "restore_s": restore,
            "load_s": med("load"),
            "samples": samples,
        }
        print(
            f"\n## P5 restore in a fresh process, {n}-turn run ({fmt_bytes(res['store_bytes'])}"
            f" FileStore file): after import -> first resumed model call (goal: <="
            f" {fmt_time(GOALS['P5'])})\n"
        )
        msgs = samples["restore"][0]["messages"] if samples["restore"] else 0
        rows = [
            [
                f"ours: FileStore open + restore() -> first model call ({msgs} messages)",
                fmt_time(restore),
                fmt_ratio(restore / GOALS["P5"]),
                verdict(restore, GOALS["P5"]),
            ],
            [
                "  of which: FileStore open + Checkpoint.load_latest (separate child)",
                fmt_time(res["load_s"]),
                "",
                "",
            ],
        ]
        if s.langgraph and samples["lg"]:
            lg = med("lg")
            res["langgraph_s"] = lg
            lg_msgs = samples["lg"][0]["messages"]
            rows.append(
                [
                    f"LangGraph: SqliteSaver open + invoke(None) -> first node ({lg_msgs} msgs)",
                    fmt_time(lg),
                    fmt_ratio(lg / GOALS["P5"]),
                    f"ours / LangGraph = {fmt_ratio(restore / lg)}",
                ]
            )
        elif not s.langgraph:
            rows.append(["LangGraph", f"skipped: {s.lg_skipped}", "", ""])
        print(f"median of {s.child_repeats} interleaved child processes\n")
        print(table(["variant", "time", "x goal", "verdict"], rows))
        self.results["P5"] = res

    # ---------------------------------------------------------------- P6

    def p6(self) -> None:
        s = self.s
        cum: list[float] = []
        tops: list[list[tuple[int, str]]] = []
        walls: dict[str, list[float]] = {"bare": [], "oma": [], "lg": []}
        codes = {
            "bare": "pass",
            "oma": "import oma_actors",
            "lg": "import langgraph.graph, langgraph.checkpoint.sqlite",
        }
        variants = ["importtime", "bare", "oma"] + (["lg"] if s.langgraph else [])
        for rep in range(s.import_repeats):
            for name in rotated(variants, rep):
                if name == "importtime":
                    total, top = importtime("oma_actors")
                    cum.append(total)
                    tops.append(top)
                else:
                    walls[name].append(wall(codes[name]))
        it = median(cum)
        bare, oma = median(walls["bare"]), median(walls["oma"])
        res: dict[str, Any] = {
            "importtime_s": it,
            "wall_bare_s": bare,
            "wall_oma_s": oma,
            "wall_added_s": oma - bare,
            "importtime_top": tops[-1] if tops else [],
            "repeats": {"importtime": cum, **walls},
        }
        print(
            f"\n## P6 import oma_actors in a fresh interpreter (goal: <= {fmt_time(GOALS['P6'])};"
            f" page cache warm, .pyc present), median of {s.import_repeats} interleaved runs\n"
        )
        rows = [
            [
                "python -X importtime -c 'import oma_actors' (cumulative)",
                fmt_time(it),
                fmt_ratio(it / GOALS["P6"]),
                verdict(it, GOALS["P6"]),
            ],
            [
                "wall: python -c 'import oma_actors' - python -c pass",
                f"{fmt_time(oma - bare)} ({fmt_time(oma)} - {fmt_time(bare)})",
                fmt_ratio((oma - bare) / GOALS["P6"]),
                verdict(oma - bare, GOALS["P6"]),
            ],
        ]
        if s.langgraph:
            lg = median(walls["lg"])
            res["wall_langgraph_added_s"] = lg - bare
            rows.append(
                [
                    "wall: import langgraph.graph + checkpoint.sqlite - python -c pass",
                    fmt_time(lg - bare),
                    fmt_ratio((lg - bare) / GOALS["P6"]),
                    f"ours / LangGraph = {fmt_ratio((oma - bare) / (lg - bare))}",
                ]
            )
        print(table(["measure", "time", "x goal", "verdict"], rows))
        if tops:
            heavy = ", ".join(f"{name} {us / 1e3:.0f} ms" for us, name in tops[-1])
            print(f"\nheaviest direct imports of oma_actors (cumulative): {heavy}")
        self.results["P6"] = res


def settings(a: argparse.Namespace, workdir: str, langgraph: bool) -> Settings:
    if a.quick:
        return Settings(
            quick=True,
            repeats=a.repeats or 3,
            payload=a.payload,
            p1_sizes=(KIB, 16 * KIB, 64 * KIB),
            p1_saves=15,
            p1_repeats=a.repeats or 3,
            p1_lg_steps=60,
            p2_turns=60,
            long_turns=150,
            child_repeats=3,
            import_repeats=3,
            langgraph=langgraph,
            workdir=workdir,
        )
    return Settings(
        quick=False,
        repeats=a.repeats or 3,
        payload=a.payload,
        p1_sizes=(KIB, 16 * KIB, 64 * KIB),
        p1_saves=100,
        p1_repeats=max(a.repeats or 3, 5),
        p1_lg_steps=60,
        p2_turns=300,
        long_turns=1000,
        child_repeats=5,
        import_repeats=7,
        langgraph=langgraph,
        workdir=workdir,
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run under 60 s")
    ap.add_argument("--json", default=None, help="also write every result as JSON here")
    ap.add_argument("--only", default="P1,P2,P3,P4,P5,P6", help="comma list of goals to run")
    ap.add_argument("--repeats", type=int, default=0, help="interleaved repeats [3]")
    ap.add_argument("--payload", type=int, default=KIB, help="bytes appended per turn [1024]")
    ap.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph anchor")
    ap.add_argument("--workdir", default=None, help="a directory on the disk under test")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    ap.add_argument("--_store", help=argparse.SUPPRESS)
    ap.add_argument("--_turns", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_payload", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._child:
        ns = argparse.Namespace(store=a._store, turns=a._turns, payload=a._payload)
        children = {
            "restore": child_restore,
            "load": child_load,
            "lg-crash": child_lg_crash,
            "lg-resume": child_lg_resume,
        }
        children[a._child](ns)
        return

    lg = None if a.no_langgraph else langgraph_versions()
    workdir = a.workdir or tempfile.mkdtemp(prefix="oma-cpbench-")
    os.makedirs(workdir, exist_ok=True)
    s = settings(a, workdir, lg is not None)
    if a.no_langgraph:
        s.lg_skipped = "--no-langgraph"
    only = {x.strip().upper() for x in a.only.split(",") if x.strip()}
    started = time.perf_counter()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            bench = Bench(s, runner)
            bench.header(lg)
            if "P1" in only:
                bench.p1()
            if "P2" in only:
                bench.p2()
            if "P3" in only or "P4" in only:
                bench.p3_p4()
            if "P5" in only:
                bench.p5()
            if "P6" in only:
                bench.p6()
    finally:
        if not a.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(f"\n# total {elapsed:.0f} s, loadavg(after) {loadavg()}")
    if a.json:
        bench.results["meta"]["total_s"] = elapsed
        with open(a.json, "w") as handle:
            json.dump(bench.results, handle, indent=1, default=str)


if __name__ == "__main__":
    main()

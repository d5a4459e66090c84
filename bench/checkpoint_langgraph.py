"""The LangGraph anchor: a copy of ``shared/bench/langgraph_bench.py``'s graph (sync durability).

A model node and a tool node each append one message of ``payload`` bytes per step; SqliteSaver
runs on a file with ``durability="sync"``. The message list is either ``operator.add`` (the
default anchor, ``channel="add"``) or LangGraph's ``DeltaChannel`` (``channel="delta"``, see
``checkpoint_delta``). It is copied here so the benchmark runs anywhere, and it runs in the same
process as ours, interleaved with it. LangGraph is imported lazily: without it installed the
benchmark still runs and says the LangGraph columns were skipped.

Variant names used by the figures: ``lg:none`` / ``lg:sqlite`` (add, without / with SqliteSaver)
and ``lg:delta-none`` / ``lg:delta`` (DeltaChannel, without / with SqliteSaver).

The append floor is interleaved here too, as in our runs: the model node makes the floor append
of our assistant tool turn, the tool node those of our tool commit and tool results, so two steps
carry exactly the floor of one of our turns. Each append is timed (a blocking wait on the floor's
own thread) and taken out of the step's time and of the run's bytes, like ours.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from checkpoint_delta import message_list_type
from checkpoint_floor import BoundaryProbe, BoundaryRecord, FloorWriter
from checkpoint_report import median
from checkpoint_workload import RunResult, Trace, io_now, make_content, remove_quietly

LG_TRACE = Trace()
LG_PROBE: BoundaryProbe | None = None
FLOOR_KINDS = {"assistant": ("assistant_tool_turn",), "tool": ("tool_commit", "tool_results")}
"""The floor appends each node makes: two steps make one of our turns."""
LG_VARIANTS = {
    "lg:none": ("add", "none"),
    "lg:sqlite": ("add", "sqlite"),
    "lg:delta-none": ("delta", "none"),
    "lg:delta": ("delta", "sqlite"),
}
"""Variant name -> (channel, mode)."""
LG_CRASH_AT: int | None = None
LG_ON_FIRST: Callable[[dict[str, Any]], None] | None = None


def langgraph_versions() -> dict[str, str] | None:
    """Installed LangGraph packages, or ``None`` when the anchor cannot run here."""
    out = {}
    for pkg in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return None
    return out


def lg_builder(payload: int, channel: str = "add") -> Any:
    """The anchor graph: model and tool nodes appending one ``payload``-byte message each."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    msg_list = message_list_type(channel)
    # The functional form, as in the anchor: annotations are evaluated here, not as strings.
    fields = {"messages": msg_list, "step": int, "limit": int}
    state_type = TypedDict("State", fields)  # type: ignore[misc]

    def body(role: str, state: dict[str, Any]) -> dict[str, Any]:
        LG_TRACE.sample()
        i = state["step"]
        if LG_PROBE is not None and LG_PROBE.floor is not None:
            for kind in FLOOR_KINDS[role]:
                got = LG_PROBE.floor.append_blocking(kind)
                if got is not None:
                    LG_PROBE.records.append(
                        BoundaryRecord(kind, i, 0.0, got[1], got[2], floor_at=got[0])
                    )
        if LG_CRASH_AT is not None and i == LG_CRASH_AT:
            os._exit(0)  # simulated crash: no cleanup, no flush
        if LG_ON_FIRST is not None:
            LG_ON_FIRST(state)
        # key "kind", not "role": LangGraph coerces role-dicts in a DeltaChannel into messages
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

    b: Any = StateGraph(state_type)  # the state type is built at run time: no static check
    b.add_node("model", model)
    b.add_node("tool", tool)
    b.add_edge(START, "model")
    b.add_conditional_edges("model", after_model, ["tool", END])
    b.add_conditional_edges("tool", after_tool, ["model", END])
    return b


def lg_config(steps: int) -> dict[str, Any]:
    """The anchor's run config: one thread, a recursion limit above ``steps``."""
    return {"configurable": {"thread_id": "bench"}, "recursion_limit": steps + 50}


def run_variant(
    name: str, steps: int, payload: int, workdir: str, floor_sizes: dict[str, int] | None = None
) -> RunResult:
    """One anchor run of a variant of ``LG_VARIANTS`` (``lg:sqlite``, ``lg:delta``, ...).

    With ``floor_sizes`` the run carries the append floor of our turns (see the module).
    """
    global LG_PROBE
    channel, mode = LG_VARIANTS[name]
    if floor_sizes is None:
        return run_langgraph(mode, steps, payload, workdir, channel)
    floor = FloorWriter(os.path.join(workdir, "floor.bin"), floor_sizes)
    LG_PROBE = BoundaryProbe(floor=floor)
    try:
        return run_langgraph(mode, steps, payload, workdir, channel)
    finally:
        LG_PROBE = None
        floor.close()


def run_langgraph(
    mode: str, steps: int, payload: int, workdir: str, channel: str = "add"
) -> RunResult:
    """One anchor run: ``none`` or ``sqlite`` (SqliteSaver on a file, durability="sync")."""
    global LG_TRACE
    builder = lg_builder(payload, channel)
    inp = {"messages": [], "step": 0, "limit": steps}
    cfg = lg_config(steps)
    probe = LG_PROBE
    LG_TRACE = trace = Trace(side=probe.floor.io if probe and probe.floor else None)
    side0 = trace.side() if trace.side is not None else (0, 0)
    db = os.path.join(workdir, "langgraph.sqlite")
    remove_quietly(db)
    if mode == "none":
        g = builder.compile()
        wchar0, io0 = io_now()
        t0 = time.perf_counter()
        out = g.invoke(inp, cfg)
        t1 = time.perf_counter()
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(db) as saver:
            g = builder.compile(checkpointer=saver)
            saver.setup()
            wchar0, io0 = io_now()
            t0 = time.perf_counter()
            out = g.invoke(inp, cfg, durability="sync")
            t1 = time.perf_counter()
    remove_quietly(db)
    if len(out["messages"]) != steps:
        raise RuntimeError(f"langgraph run {mode}: {len(out['messages'])} messages")
    # Reuse RunResult: a "turn" is one LangGraph step here; stamps are node entries.
    trace.sample()
    trace.stamps[-1] = t1
    return RunResult(
        total_s=t1 - t0,
        turns=steps,
        trace=trace,
        io0=io0,
        wchar0=wchar0,
        probe=probe,
        side0=side0,
    )


def median_interval(r: RunResult) -> float:
    """The median time per step of an anchor run."""
    return median(r.intervals)


def child_lg_crash(args: argparse.Namespace) -> None:
    """Run the anchor until it crashes (``os._exit``) at step ``args.turns``."""
    global LG_CRASH_AT
    from langgraph.checkpoint.sqlite import SqliteSaver

    LG_CRASH_AT = args.turns
    builder = lg_builder(args.payload, args.channel)
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

    t0, c0 = time.perf_counter(), time.process_time()

    def on_first(state: dict[str, Any]) -> None:
        t1, c1 = time.perf_counter(), time.process_time()
        out = {"seconds": t1 - t0, "cpu_seconds": c1 - c0, "messages": len(state["messages"])}
        sys.stdout.write(json.dumps(out))
        sys.stdout.write("\n")
        sys.stdout.flush()
        os._exit(0)

    LG_ON_FIRST = on_first
    builder = lg_builder(args.payload, args.channel)
    with SqliteSaver.from_conn_string(args.store) as saver:
        g = builder.compile(checkpointer=saver)
        g.invoke(None, lg_config(args.turns + 4), durability="sync")
    print(json.dumps({"error": "the resumed run ran no node"}))

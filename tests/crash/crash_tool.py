"""The ledger tool of the crash scenarios: every call's external effect, recorded outside the process.

The tool appends ``enter`` / ``effect`` (or ``dedupe``) / ``return`` lines to ``effects.jsonl``
(fsynced, so a line written right before ``os._exit`` survives) and can crash or block around
its effect. Those crash points sit *inside* the tool, where no durable boundary is reported:
the effect is the outside world's, not a write of run state (crash matrix C03, C05, C11b).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

from crash_ledger import EFFECTS, append_line, read_jsonl
from crash_wiring import crash_now, ready_and_block
from pydantic import BaseModel

from oma_actors import Tool, ToolContext, define_tool


class LedgerArgs(BaseModel):
    """Input of the ledger tool."""

    label: str


@dataclasses.dataclass
class ToolBehaviour:
    """How the ledger tool behaves in this process (crash points and gates apply to P1 only)."""

    mode: str = "default"
    crash: str | None = None  # before_effect | after_effect | after_return | kill_after_effect
    crash_label: str = "A"
    gate: str | None = None  # q_before_effect | q_after_effect | a_before_effect
    run_attempt: int = 1
    q_effect_done: asyncio.Event | None = None
    entered: asyncio.Event | None = None  # set whenever the tool is entered (in-process tests)


def make_ledger_tool(ledger: Path, behaviour: ToolBehaviour) -> Tool:
    """The ``ledger`` tool: records enter / effect / return in ``effects.jsonl``.

    Modes: ``default`` (effect every time it runs), ``idempotent`` (dedupe on the key
    ``run_id:task_id:tool_call_id`` against the ledger before the effect) and ``unsafe``
    (declared ``effect="unsafe"``, so the runtime writes a dispatch record first). The label
    ``boom`` raises after ``enter`` (an error result, no effect).
    """
    effects = ledger / EFFECTS
    crashed: set[str] = set()

    def log(ctx: ToolContext, phase: str, label: str) -> None:
        append_line(
            effects,
            {
                "pid": os.getpid(),
                "attempt": behaviour.run_attempt,
                "task_attempt": ctx.task_attempt,
                "tool_call_id": ctx.tool_call_id,
                "phase": phase,
                "key": ctx.idempotency_key,
                "label": label,
            },
            sync=True,
        )

    def crash_point(point: str, label: str) -> bool:
        if behaviour.crash != point or label != behaviour.crash_label or label in crashed:
            return False
        crashed.add(label)
        return True

    async def execute(args: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(args, LedgerArgs)
        label = args.label
        log(ctx, "enter", label)
        if behaviour.entered is not None:
            behaviour.entered.set()
        if crash_point("before_effect", label):
            crash_now(f"tool {label} before effect")
        if label == "boom":
            raise RuntimeError("boom: the tool failed")
        if (behaviour.gate, label) in (("q_before_effect", "Q"), ("a_before_effect", "A")):
            await asyncio.Event().wait()  # never reaches its effect in this process
        if label == "P" and behaviour.gate == "q_after_effect":
            assert behaviour.q_effect_done is not None
            await behaviour.q_effect_done.wait()  # Q's effect happens before P commits
        done = behaviour.mode == "idempotent" and any(
            line["phase"] == "effect" and line["key"] == ctx.idempotency_key
            for line in read_jsonl(effects)
        )
        log(ctx, "dedupe" if done else "effect", label)
        if crash_point("after_effect", label):
            crash_now(f"tool {label} after effect")
        if crash_point("kill_after_effect", label):
            ready_and_block(f"tool {label} after effect")
        if behaviour.gate == "q_after_effect" and label == "Q":
            assert behaviour.q_effect_done is not None
            behaviour.q_effect_done.set()
            await asyncio.Event().wait()  # Q's effect is done, but it never returns here
        log(ctx, "return", label)
        if crash_point("after_return", label):
            # Exit on the next loop iteration: the tool has returned, its commit is not durable.
            asyncio.get_running_loop().call_soon(crash_now, f"tool {label} after return")
        return f"ok:{label}:{ctx.tool_call_id}"

    return define_tool(
        name="ledger",
        description="Records an external effect in the test ledger.",
        input_model=LedgerArgs,
        execute=execute,
        effect="unsafe" if behaviour.mode == "unsafe" else "idempotent",
    )

"""What history anchors cost a running run: this tree against a baseline tree, side by side.

A 1000-turn journal-first run (FileStore + durable JSONL journal, one tool call and ``--payload``
bytes per turn on the scripted model) is run in a fresh child process per sample, alternately
with this tree's ``oma_actors`` and with the baseline's (``--baseline``: a directory holding
another ``oma_actors``, e.g. ``git archive main oma_actors | tar -x -C /tmp/base``). Each child
reports the run's wall time, the bytes it wrote (``wchar`` of ``/proc/self/io``, logical bytes as
P3 counts them), the store file's final size and the run's compactions (``--store sqlite``: a
``SqliteStore`` with its database's own journal, the file then holding both); the table gives
medians of the interleaved repeats and the ratio this tree / baseline (P2/P3: a regression over
5% of the run time per turn is not acceptable; differences under 1.3x are noise on shared
machines).

Run: ``.venv/bin/python bench/history_run_cost.py --baseline /tmp/base [--turns 1000]
[--store sqlite]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import asyncio, json, sys, tempfile, time
from pathlib import Path
from pydantic import BaseModel
from oma_actors import (AgentConfig, CheckpointOptions, JournalOptions, OpenMultiAgent, Task,
                        Team, ToolContext, define_tool)
from oma_actors.journal import JsonlRunJournal, SqliteRunJournal
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore, SqliteStore
from oma_actors.testing import ScriptedAdapter

turns, payload, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

class Note(BaseModel):
    text: str

async def note(args: Note, ctx: ToolContext) -> str:
    return "x" * payload

def answer(messages, options):
    n = sum(1 for m in messages if m.role == "assistant")
    if n < turns:
        call = ToolUseBlock(f"c{n}", "note", {"text": f"t{n}"})
        return LLMResponse([call], stop_reason="tool_use")
    return LLMResponse([TextBlock("done")])

def wchar() -> int:
    for line in open("/proc/self/io"):
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0

async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="oma-history-cost-"))
    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(answer), tools=[tool],
                                  max_turns=turns + 5)])
    if kind == "file":
        store, journal = FileStore(root / "state.json"), JsonlRunJournal(root / "run.jsonl",
                                                                        flush_interval_ms=0)
    else:
        store, journal = SqliteStore(root / "state.db"), SqliteRunJournal(root / "state.db")
    saves = {"snapshot": 0, "journal": 0}
    def on_event(event):
        mode = getattr(event, "mode", None)
        if type(event).__name__ == "CheckpointSaved" and mode in saves:
            saves[mode] += 1
    before, started = wchar(), time.perf_counter()
    try:
        result = await OpenMultiAgent(on_progress=on_event).run_tasks(
            team, [Task("long", "x", assignee="w", id="t0")],
            checkpoint=CheckpointOptions(store=store, run_id="r1"),
            journal=JournalOptions(journal))
    finally:
        await journal.close()
        if kind != "file":
            await store.aclose()
    seconds, written = time.perf_counter() - started, wchar() - before
    assert result.success, result.status
    # The store file (a SQLite database: with its WAL, journal rows included).
    files = ["state.json"] if kind == "file" else ["state.db", "state.db-wal"]
    size = sum((root / name).stat().st_size for name in files if (root / name).exists())
    print(json.dumps({"seconds": seconds, "wchar": written, "store": size, "saves": saves}))

asyncio.run(main())
"""


def sample(source: Path, turns: int, payload: int, kind: str) -> dict[str, object]:
    """One run in a fresh process importing ``oma_actors`` from ``source``."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(turns), str(payload), kind],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--baseline", required=True, help="a directory holding another oma_actors")
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--payload", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--store", choices=("file", "sqlite"), default="file")
    a = ap.parse_args()
    trees = {"baseline": Path(a.baseline).resolve(), "this tree": Path(__file__).parents[1]}
    got: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
    for repeat in range(a.repeats):
        names = list(trees) if repeat % 2 == 0 else list(reversed(trees))
        for name in names:
            got[name].append(sample(trees[name], a.turns, a.payload, a.store))
            print(f"# {name} repeat {repeat + 1}: {got[name][-1]}", flush=True)

    def med(name: str, field: str) -> float:
        return statistics.median(float(str(s[field])) for s in got[name])

    print(
        f"\n{a.store} store, {a.turns} turns x {a.payload} B, medians of {a.repeats} interleaved"
        " repeats"
    )
    print(f"{'tree':<11}{'ms/turn':>9}{'wchar MiB':>11}{'store KiB':>11}")
    for name in trees:
        print(
            f"{name:<11}{med(name, 'seconds') * 1000 / a.turns:>9.3f}"
            f"{med(name, 'wchar') / 2**20:>11.2f}{med(name, 'store') / 1024:>11.0f}"
        )
    base, mine = "baseline", "this tree"
    print(
        f"ratio      {med(mine, 'seconds') / med(base, 'seconds'):>9.3f}"
        f"{med(mine, 'wchar') / med(base, 'wchar'):>11.3f}"
        f"{med(mine, 'store') / med(base, 'store'):>11.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a ``RedactingStore`` costs a run: saves through it against saves to the bare store.

One agent, ``--turns`` turns, each asking for one tool call whose result is ``--payload`` bytes
of one long word (``m0000001:xxxx...``: a hash, a base64 blob or a minified file looks the same
to the rules), checkpointed on a ``FileStore`` in OMA's mode (the whole snapshot per boundary,
so every save redacts the whole conversation: the worst case for the wrapper). The two kinds
run interleaved, run by run, in one process (BENCH.md); the table gives the median time per
turn and the ratio, and one line times the rules alone on the run's last snapshot.

Before the assignment rules were made linear, one 1 KiB word cost 45 ms to scan, so this run
at 20 turns took minutes per save (see ``tests/stores/test_redaction_linear.py``); then 9.6x,
with the store parsing, redacting and encoding every snapshot again; since the codec redacts
each message as it first encodes it (``EncodeCache(redactor)``), about 1.0x.

Run: ``.venv/bin/python bench/redaction.py [--turns 100] [--payload 1024] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from checkpoint_workload import Trace, bench_agent, bench_task

from oma_actors import CheckpointOptions, OpenMultiAgent, Team
from oma_actors.stores import FileStore, RedactingStore
from oma_actors.stores.redaction import redact


async def one_run(folder: Path, kind: str, turns: int, payload: int) -> float:
    """One run's wall time per turn; ``kind`` is ``file`` or ``redacting``."""
    team = Team("bench", [bench_agent(turns, payload, Trace())])
    async with FileStore.open(folder / f"{kind}.json") as inner:
        store = RedactingStore(inner) if kind == "redacting" else inner
        start = time.perf_counter()
        await OpenMultiAgent().run_tasks(
            team, [bench_task()], checkpoint=CheckpointOptions(store=store, run_id="bench")
        )
        return (time.perf_counter() - start) / turns


async def main(turns: int, payload: int, repeats: int) -> None:
    times: dict[str, list[float]] = {"file": [], "redacting": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(repeats):
            for kind in times:  # interleaved, run by run
                times[kind].append(await one_run(Path(folder), kind, turns, payload))
        async with FileStore.open(Path(folder) / "file.json") as store:
            entries = await store.list()
        largest = max((entry.value for entry in entries), key=len)
    print(f"OMA-mode run on a FileStore, {turns} turns x 1 tool result of {payload} B")
    print(f"| store | per turn (median of {repeats}) | runs |")
    print("|---|---|---|")
    for kind, values in times.items():
        runs = ", ".join(f"{v * 1e3:.2f}" for v in values)
        print(f"| {kind} | {statistics.median(values) * 1e3:.2f} ms | {runs} ms |")
    ratio = statistics.median(times["redacting"]) / statistics.median(times["file"])
    print(f"redacting / file: {ratio:.2f}x")
    start = time.perf_counter()
    redact(largest)
    took = time.perf_counter() - start
    print(
        f"the rules alone on the largest entry ({len(largest) / 1024:.0f} KiB): {took * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--payload", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.payload, args.repeats))

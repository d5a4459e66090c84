"""Records written by the TypeScript OMA (tests/runs/golden) are read here and written back alike.

Each golden file is one scenario, a stored record per line; ``SCENARIOS`` spells the steps that
produced each line, and our ledger, driven through the same steps on a fake clock, must store
exactly the same bytes. See golden/README.md for where the lines come from.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest
from run_helpers import START, ledger
from service_kit import require_executable

from oma_actors.keyspace import run_record_key
from oma_actors.runs import MemoryStoreRunStore, RunLeaseHandle, RunRecord
from oma_actors.stores.base import ConditionalStore
from oma_actors.testing import FakeClock

GOLDEN = Path(__file__).parent / "golden"
FILES = sorted(GOLDEN.glob("*.jsonl"))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


ALL_LINES = [(path.name, n, line) for path in FILES for n, line in enumerate(_lines(path), 1)]


@pytest.mark.parametrize(
    ("name", "n", "line"), ALL_LINES, ids=[f"{f}:{n}" for f, n, _ in ALL_LINES]
)
def test_a_golden_record_reads_and_writes_back_byte_identical(name: str, n: int, line: str) -> None:
    parsed = RunRecord.parse(line)
    assert parsed.to_json() == line
    assert json.loads(parsed.to_json()) == json.loads(line)


def test_golden_lines_are_what_json_stringify_writes() -> None:
    node = require_executable("node")  # skipped locally without node, FAILS under CI=true
    script = (
        "const lines = require('fs').readFileSync(0, 'utf8').split('\\n').filter(Boolean);"
        "const bad = lines.filter((l) => JSON.stringify(JSON.parse(l)) !== l);"
        "process.stdout.write(JSON.stringify(bad));"
    )
    text = "\n".join(line for _, _, line in ALL_LINES)
    out = subprocess.run(
        [node, "-e", script], input=text, capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


async def test_a_golden_record_is_served_from_the_store_and_moved_on(
    store: ConditionalStore, clock: FakeClock
) -> None:
    """A TS-written record in a FileStore or an InMemoryStore is a record like any other."""
    taken_over = _lines(GOLDEN / "takeover_suspend_resume.jsonl")[2]  # worker-b, until 00:03
    await store.set(run_record_key("run-golden"), taken_over)
    run_store = MemoryStoreRunStore(store)
    assert (await run_store.get("run-golden")) == RunRecord.parse(taken_over)
    clock.set(START + timedelta(minutes=4))
    handle = await ledger(store, clock, "worker-c").acquire("run-golden", heartbeat=False)
    assert (handle.fencing_token, handle.attempt) == (3, 3)


Step = Callable[[ConditionalStore, FakeClock, dict[str, RunLeaseHandle]], Awaitable[object]]


def at(seconds: float, step: Step) -> Step:
    async def timed(
        store: ConditionalStore, clock: FakeClock, h: dict[str, RunLeaseHandle]
    ) -> object:
        clock.set(START + timedelta(seconds=seconds))
        return await step(store, clock, h)

    return timed


def acquire(owner: str, run_id: str) -> Step:
    async def step(
        store: ConditionalStore, clock: FakeClock, h: dict[str, RunLeaseHandle]
    ) -> object:
        h[owner] = await ledger(store, clock, owner).acquire(run_id, heartbeat=False)
        return h[owner]

    return step


def command(owner: str, name: str, *args: object) -> Step:
    async def step(
        store: ConditionalStore, clock: FakeClock, h: dict[str, RunLeaseHandle]
    ) -> object:
        return await getattr(h[owner], name)(*args)

    return step


def operator(name: str, run_id: str, *args: object) -> Step:
    async def step(
        store: ConditionalStore, clock: FakeClock, h: dict[str, RunLeaseHandle]
    ) -> object:
        return await getattr(ledger(store, clock, "operator"), name)(run_id, *args)

    return step


CP_REF = {"key": "__oma_checkpoint__/run-golden/latest", "snapshotVersion": 4, "savedAt": "2026-09-01T00:00:10.000Z"}  # fmt: skip
SCENARIOS: dict[str, tuple[str, list[Step]]] = {
    "takeover_suspend_resume.jsonl": ("run-golden", [
        at(0, acquire("worker-a", "run-golden")),
        at(10, command("worker-a", "record_checkpoint", CP_REF)),
        at(120, acquire("worker-b", "run-golden")),
        at(150, command("worker-b", "suspend", ["apr_1", "apr_2"])),
        at(180, operator("request_resume", "run-golden")),
        at(185, acquire("worker-a", "run-golden")),
        at(200, command("worker-a", "complete", {"code": "ok"})),
    ]),
    "operator_cancel.jsonl": ("run-ü-✓", [
        at(0, acquire("worker-a", "run-ü-✓")),
        at(1, operator("cancel", "run-ü-✓", 'stopped by «ops»\n"now"')),
    ]),
    "release_reacquire.jsonl": ("run-release", [
        at(0, acquire("worker-a", "run-release")),
        at(1, command("worker-a", "release")),
        at(2, acquire("worker-b", "run-release")),
        at(3, command("worker-b", "fail", {"code": "failed", "message": "tool crashed"})),
    ]),
}  # fmt: skip


def test_every_golden_file_has_a_scenario() -> None:
    assert sorted(SCENARIOS) == [path.name for path in FILES]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_our_ledger_writes_the_golden_bytes(
    name: str, store: ConditionalStore, clock: FakeClock
) -> None:
    run_id, steps = SCENARIOS[name]
    expected = _lines(GOLDEN / name)
    handles: dict[str, RunLeaseHandle] = {}
    written = []
    for step in steps:
        await step(store, clock, handles)
        entry = await store.get(run_record_key(run_id))
        assert entry is not None
        written.append(entry.value)
    assert written == expected

"""The append floor, and a probe that times every durable boundary of a running run.

**The floor** (BENCH.md): what the durability promise needs at a boundary is to append the bytes
that changed there and make them durable: ``os.write`` on an ``O_APPEND`` file + ``os.fdatasync``,
on the same disk. The bytes are the durable journal's own: a calibration run of the journal
configuration records how many bytes its journal file grew per boundary, and the floor appends
that many (median per boundary kind) at the same boundary. It runs in a worker thread awaited
from the event loop, as the journal's own write does: a runtime that serves many runs cannot
block its loop on an fsync. ``inner`` is the time of the two syscalls alone, measured in the
thread, so the cost of that hop is visible. The hop is the cheapest we know, the journal's own
kind (a thread fed by a ``queue.SimpleQueue`` answering with one ``call_soon_threadsafe``, as
``oma_actors.stores.io_thread`` does, about 26 us of CPU; an executor's ``run_in_executor``
costs about 86): a floor paying a dearer hop than the journal would flatter every ratio. The
thread is the floor's own, so ``/proc/self/task/<tid>/io`` gives the floor's own logical and
disk bytes, which are taken out of the run's totals.

**The probe** wraps ``oma_actors.agents.loop._boundary``, the one function through which the
agent loop reports each of its durable boundaries (assistant tool turn, tool commit, tool
results, terminal) and waits for it to be saved. So the time it records is the real save path
of a running run: the hop to the run actor, building the snapshot (and the journal events),
the writer's encode with its cache, and the store write or the journal append. With a floor
attached, each boundary is followed (even boundaries) or preceded (odd ones) by one floor
append of that boundary's bytes: the floor is interleaved save by save, never in a block. Every
floor append is timed from the loop, so a run's own time is its wall time minus its floor time
(``RunResult.net_total_s``), and each turn's likewise. This patches a private function of the
bench process only; if it is renamed, the probe fails loudly rather than timing nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from oma_actors.agents import loop as agent_loop

TURN_KINDS = ("assistant_tool_turn", "tool_commit", "tool_results")
"""The per-turn boundaries of the workload (an ``echo`` tool is not ``unsafe``: no dispatch)."""

BoundaryFn = Callable[[Any, Any, str, Any], Awaitable[bool]]


def append_sync(fd: int, data: bytes) -> float:
    """``os.write`` of ``data`` + ``os.fdatasync``; returns the seconds the two syscalls took."""
    t0 = time.perf_counter()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fdatasync(fd)
    return time.perf_counter() - t0


class FloorWriter:
    """Appends each boundary's changed bytes to its own file + fdatasync (the floor).

    Args:
        path: the floor's file (created, truncated); on the disk under test.
        sizes: bytes per boundary kind; a kind missing here appends nothing.
    """

    def __init__(self, path: str, sizes: Mapping[str, int]) -> None:
        self.path = path
        self.sizes = dict(sizes)
        self._blobs = {kind: b"f" * n for kind, n in self.sizes.items() if n > 0}
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="bench-floor", daemon=True)
        started = threading.Event()
        self._calls.put(started.set)
        self._thread.start()
        started.wait()
        self.tid = self._thread.native_id

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            call()

    async def append(self, kind: str) -> tuple[float, float, float] | None:
        """One floor append for ``kind``: (start, seconds awaited, seconds in the syscalls)."""
        blob = self._blobs.get(kind)
        if blob is None:
            return None
        loop = asyncio.get_running_loop()
        done: asyncio.Future[float] = loop.create_future()
        fd = self._fd

        def call() -> None:
            inner = append_sync(fd, blob)
            loop.call_soon_threadsafe(done.set_result, inner)

        t0 = time.perf_counter()
        self._calls.put(call)
        inner = await done
        return t0, time.perf_counter() - t0, inner

    def append_blocking(self, kind: str) -> tuple[float, float, float] | None:
        """``append`` for synchronous code (LangGraph's nodes): a blocking wait on the thread."""
        blob = self._blobs.get(kind)
        if blob is None:
            return None
        done: Future[float] = Future()
        fd = self._fd
        t0 = time.perf_counter()
        self._calls.put(lambda: done.set_result(append_sync(fd, blob)))
        inner = done.result()
        return t0, time.perf_counter() - t0, inner

    def io(self) -> tuple[int, int]:
        """(wchar, write_bytes) of the floor's thread: the floor's own logical and disk bytes."""
        wchar = disk = 0
        with open(f"/proc/self/task/{self.tid}/io", "rb") as handle:
            for line in handle:
                if line.startswith(b"wchar:"):
                    wchar = int(line.split()[1])
                elif line.startswith(b"write_bytes:"):
                    disk = int(line.split()[1])
        return wchar, disk

    def close(self) -> None:
        """Stop the thread; close and remove the floor's file."""
        self._calls.put(None)
        self._thread.join()
        os.close(self._fd)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)


@dataclass(slots=True)
class BoundaryRecord:
    """One boundary of a run: its kind, turn, save time and (if any) its floor append."""

    kind: str
    turn: int
    seconds: float
    floor: float | None = None
    floor_inner: float | None = None
    floor_at: float = 0.0
    journal_size: int = -1


@dataclass(slots=True)
class BoundaryProbe:
    """What the probe records for one run.

    Args:
        floor: interleave one floor append with every boundary (None: time the boundaries only).
        journal_path: stat this file after each boundary (the calibration of the floor's bytes).
    """

    floor: FloorWriter | None = None
    journal_path: str | None = None
    records: list[BoundaryRecord] = field(default_factory=list)
    turn: int = 0

    def floor_total(self) -> float:
        """Seconds the run spent awaiting floor appends."""
        return sum(r.floor for r in self.records if r.floor is not None)

    def floor_between(self, start: float, end: float) -> float:
        """Seconds of the floor appends that started within ``[start, end)``."""
        return sum(
            r.floor for r in self.records if r.floor is not None and start <= r.floor_at < end
        )

    def floor_inner_between(self, start: float, end: float) -> float:
        """The syscalls' own seconds (no thread hop) of the floor appends started in the range."""
        return sum(
            r.floor_inner
            for r in self.records
            if r.floor_inner is not None and start <= r.floor_at < end
        )

    def wrap(self, original: BoundaryFn) -> BoundaryFn:
        """A ``_boundary`` that times ``original`` and interleaves the floor around it."""

        async def timed(ctx: Any, state: Any, kind: str, facts: Any = ()) -> bool:
            if kind == "assistant_tool_turn":
                self.turn += 1
            floor_first = len(self.records) % 2 == 1
            floor = None
            if self.floor is not None and floor_first:
                floor = await self.floor.append(kind)
            t0 = time.perf_counter()
            ok = await original(ctx, state, kind, facts)
            t1 = time.perf_counter()
            if self.floor is not None and not floor_first:
                floor = await self.floor.append(kind)
            size = -1
            if self.journal_path is not None:
                with contextlib.suppress(FileNotFoundError):
                    size = os.stat(self.journal_path).st_size
            self.records.append(
                BoundaryRecord(
                    kind=kind,
                    turn=self.turn,
                    seconds=t1 - t0,
                    floor=None if floor is None else floor[1],
                    floor_inner=None if floor is None else floor[2],
                    floor_at=0.0 if floor is None else floor[0],
                    journal_size=size,
                )
            )
            return ok

        return timed


@contextlib.contextmanager
def probing(probe: BoundaryProbe | None) -> Iterator[None]:
    """Install ``probe`` around the agent loop's boundary function for the duration."""
    if probe is None:
        yield
        return
    original: BoundaryFn | None = getattr(agent_loop, "_boundary", None)
    if original is None:
        raise RuntimeError(
            "oma_actors.agents.loop._boundary is gone: update bench/checkpoint_floor"
        )
    agent_loop._boundary = probe.wrap(original)  # type: ignore[assignment]
    try:
        yield
    finally:
        agent_loop._boundary = original  # type: ignore[assignment]


def bytes_per_kind(records: list[BoundaryRecord]) -> dict[str, int]:
    """Median journal growth per boundary kind (growth since the previous boundary's end)."""
    grown: dict[str, list[int]] = {}
    last = 0
    for record in records:
        if record.journal_size < 0:
            continue
        grown.setdefault(record.kind, []).append(record.journal_size - last)
        last = record.journal_size
    out = {}
    for kind, values in grown.items():
        values.sort()
        out[kind] = values[len(values) // 2]
    return out

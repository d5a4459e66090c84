"""The parse floor of a restore: orjson alone over the bytes a restore reads (P5).

What no reader of these formats can avoid: ``orjson.loads`` of the FileStore's state file, of
the snapshot text it holds (the FileStore keeps each value as a JSON string, so the snapshot is
parsed twice, OMA's format), and of each journal line of the run's tail; no checks, no objects
built. Every parsed value is kept, as a restore keeps what it built: a floor that freed each
value at once would reuse the same memory and flatter itself. Run in a process that has done
nothing else, it is the floor a P5 child (a fresh process) cannot go under.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import orjson

from oma_actors.checkpoint import Checkpoint
from oma_actors.journal import peek_seq
from oma_actors.journal.fold import tail_read_from
from oma_actors.stores import FileStore


def tail_lines(journal_path: str, first_seq: int) -> list[bytes]:
    """The journal's lines with a seq of at least ``first_seq`` (the bench's journals hold one
    run, so these are the tail its restore reads from ``first_seq``)."""
    with open(journal_path, "rb") as file:
        lines = file.read().splitlines()
    return [line for line in lines if _seq_of(line) >= first_seq]


def parse_floor(store_path: str, lines: list[bytes]) -> float:
    """CPU seconds orjson alone takes to parse the state file and ``lines`` (module docstring)."""
    with open(store_path, "rb") as file:
        data = file.read()
    gc.disable()  # as the restore's reads run with the collector held off (``gc_paused``)
    try:
        t = time.process_time()
        values = [entry["value"] for entry in orjson.loads(data)["entries"]]
        kept = [orjson.loads(value) for value in values]
        kept += [orjson.loads(line) for line in lines]
        return time.process_time() - t
    finally:
        gc.enable()


def _seq_of(line: bytes) -> int:
    # The journal's own reader of a line's seq (either layout: OMA's ends ``,"seq":N,...``).
    seq = peek_seq(line)
    assert seq is not None, line[:80]
    return seq


async def tail_from(store_path: str, run_id: str) -> int:
    """The first seq a restore of the store's latest snapshot reads from its journal."""
    async with FileStore.open(store_path) as store:
        snapshot = await Checkpoint(store, run_id=run_id).load_latest()
    assert snapshot is not None, f"{store_path} holds no snapshot"
    return tail_read_from(snapshot)


def child_floor(args: argparse.Namespace) -> None:
    """A P5 child that only parses (``--_child floor``): prints ``parse_floor`` of the store and
    of its journal's tail from ``args.tail_from`` (no journal: the store alone) as ``seconds``."""
    lines = tail_lines(args.journal, args.tail_from) if args.journal else []
    seconds = parse_floor(args.store, lines)
    print(json.dumps({"seconds": seconds, "cpu_seconds": seconds, "messages": 0}))

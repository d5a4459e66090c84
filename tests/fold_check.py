"""What a restore would fold back at a durable boundary, against the run's own state there.

Shared by the fold property test (``tests/journal_facts``) and the tests of one fact the fold
must carry (``tests/parity/test_max_turns_parity.py``): wrap ``RunWriter.save_run`` so that, at
every durable save, the stored snapshot plus the journal tail through the boundary's watermark
is folded and compared with the snapshot of the run at that boundary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import fields, replace
from typing import Any

from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.codec import decode, encode
from oma_actors.checkpoint.journal_path import mark_started_unsafe
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.run_writer import RunWriter, SaveOutcome
from oma_actors.domain.snapshot import CheckpointSnapshot
from oma_actors.journal import RunJournal
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.journal.fold import Discarded, fold_tail
from oma_actors.journal.tail import read_journal_tail
from oma_actors.stores import MemoryStore

# journal_ref says where the journal is and how far it was known durable, not the run's state.
_IGNORED = frozenset({"version", "revision", "created_at", "journal_watermark_seq", "journal_ref"})


def difference(restored: Any, actual: Any) -> str | None:
    """The first member where a restore would differ from the run's state, or ``None``."""
    for field in fields(restored):
        if field.name in _IGNORED or not field.compare:
            continue
        mine, theirs = getattr(restored, field.name), getattr(actual, field.name)
        if mine == theirs:
            continue
        if field.name != "in_flight" or len(mine) != len(theirs):
            return f"{field.name} differs"
        for a, b in zip(mine, theirs, strict=True):
            if a == b:
                continue
            for sub in fields(a.state):
                if getattr(a.state, sub.name) != getattr(b.state, sub.name):
                    return f"in_flight[{a.task_id}].state.{sub.name} differs"
            return f"in_flight[{a.task_id}] differs outside its state"
    return None


def on_disk(snapshot: Any) -> Any:
    """``snapshot`` as a restore of its stored form reads it back."""
    return adopt_journal_fields(decode(encode(snapshot), key="k"))


async def saved_with_snapshot(
    save: Callable[..., Awaitable[SaveOutcome]], writer: RunWriter, run: RunAtBoundary, **kw: Any
) -> tuple[SaveOutcome, CheckpointSnapshot]:
    """Save ``run``; the outcome and the whole snapshot of the run at that boundary.

    The snapshot the writer built when it wrote one; else (a journal-only save builds none,
    issue 19) one built now, while the run still waits for the save: the state it holds there.
    """
    built: list[CheckpointSnapshot] = []

    async def build() -> CheckpointSnapshot:
        built.append(await run.build())
        return built[-1]

    outcome = await save(writer, replace(run, build=build), **kw)
    return outcome, built[-1] if built else await run.build()


async def fold_mismatch(
    store: MemoryStore,
    run_id: str,
    journal: RunJournal,
    snapshot: CheckpointSnapshot,
    unsafe: Mapping[str, Collection[str]],
) -> str | None:
    """Where the restore of ``run_id`` right after ``snapshot``'s boundary (the stored snapshot
    and the journal tail through its watermark, folded) differs from ``snapshot``, or ``None``.
    """
    stored = await Checkpoint(store, run_id=run_id).load_latest()
    assert stored is not None
    stored = adopt_journal_fields(stored)
    watermark = snapshot.journal_watermark_seq or 0
    tail = [e for e in await read_journal_tail(journal, stored) if e.seq <= watermark]
    result = fold_tail(stored, tail, enforce_lineage=False)
    assert not isinstance(result, Discarded), result.reason
    restored = mark_started_unsafe(result.snapshot, result.started_calls, unsafe)
    return difference(on_disk(restored), on_disk(snapshot))

"""``verify_run``: audit a journal offline (spec JR-21..JR-23).

Seqs are numbered per run (``seq`` is strictly increasing per ``runId``, spec 17.2), and a journal
may hold many runs (one JSONL file for many runs, a fork child after its parent): every check
below is applied to each run's own events, in the order the journal holds them, and a finding
names its run. Within one run the checks are OMA's ``verifyRun`` (journal/verify.ts), which reads
its input as a single stream.

Three checks, in OMA's order: (1) sequence integrity: a repeated seq (``duplicate-sequence``) or a
decrease (``out-of-order-sequence``) fails, forward gaps are legal, the first occurrence of a seq
wins; (2) referential integrity of every ``sourceEventSeqs`` (and of ``context/replace``'s
``dropped`` and ``replacements``): a reference at or above the citing seq is a ``BROKEN_LINK``, a
reference below it that the journal does not hold is an inconclusive gap (an evicted head is not
an error); (3) every block of every ``llm/request`` must be reproducible from its lineage. A
reference resolves among its own run's events: another run's event of the same seq is not its
source. A fork's child is the exception, when the caller says which runs are forks (``forks``,
from the children's snapshots' ``forkedFrom``): its state up to the fork point is its parent's,
so a reference the child does not hold resolves among its parent's events at or below the fork
point (and on up a chain of forks), when they are in the same journal. Without ``forks``, or for
a reference the parent does not hold either, the reference stays a gap.

Not proven (JR-23): schema validity, turn pairing, run/start and run/end presence; redaction at
write time can make correct blocks ``not-reproducible``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from oma_actors.journal.event import RECORDED_RESULT
from oma_actors.journal.vocabulary import canonical_content_hash

if TYPE_CHECKING:
    from oma_actors.domain.snapshot import ForkedFrom
    from oma_actors.journal.base import RunJournal
    from oma_actors.journal.event import JournalEvent

SEQ_NOT_MONOTONIC = "SEQ_NOT_MONOTONIC"
BROKEN_LINK = "BROKEN_LINK"
MISSING_CONTEXT_REPLACE = "MISSING_CONTEXT_REPLACE"
_MESSAGE_TYPES = ("user/message", "assistant/message")


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyFinding:
    """One finding: a failure, or an inconclusive gap.

    Attributes:
        code: ``SEQ_NOT_MONOTONIC``, ``BROKEN_LINK`` or ``MISSING_CONTEXT_REPLACE``.
        reason: ``duplicate-sequence``, ``out-of-order-sequence``, ``forward-reference``,
            ``missing-source`` (inconclusive), ``no-lineage``, ``not-reproducible``.
        seq: the event at fault.
        run_id: the run the event belongs to (seqs are numbered per run).
        message_index: for a request block, its message.
        block_index: for a request block, its index in the message.
        missing_seqs: for a gap, the referenced seqs the journal does not hold.
    """

    code: str
    reason: str
    seq: int
    run_id: str | None = None
    message_index: int | None = None
    block_index: int | None = None
    missing_seqs: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyResult:
    """The verdict: ``ok`` when there is no failure (inconclusive gaps alone are ok, JR-23).

    ``stats`` (``events``, ``requests``, ``blocks_checked``: OMA's three counts, by API.md's
    snake_case names since this is a Python value, not stored JSON) counts the whole journal;
    ``runs`` names the runs it holds, in the order of their first event.
    """

    ok: bool
    failures: list[VerifyFinding] = field(default_factory=list)
    inconclusive: list[VerifyFinding] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)


async def verify_run(
    journal: RunJournal | Sequence[JournalEvent], *, forks: Mapping[str, ForkedFrom] | None = None
) -> VerifyResult:
    """Verify a run's journal; reads it once with ``read_from(0)``.

    Args:
        journal: the journal, or its events.
        forks: per run id, the fork it was started from (a snapshot's ``forked_from``): that
            run's references below its own events resolve among its parent's events up to the
            fork point too (see the module doc). ``None``: no run is known to be a fork.

    Raises:
        JournalCorruptError: a JSONL journal has a bad line (not a torn trailing one).
    """
    events = list(journal) if isinstance(journal, Sequence) else await journal.read_from(0)
    return verify_events(events, forks=forks)


def verify_events(
    events: Sequence[JournalEvent], *, forks: Mapping[str, ForkedFrom] | None = None
) -> VerifyResult:
    """``verify_run`` over events already read (pure): each run's events verified on their own
    (a fork's child with its parent's events up to its fork point, ``forks``)."""
    by_run: dict[str, list[JournalEvent]] = {}
    for event in events:
        by_run.setdefault(event.run_id, []).append(event)
    sequenced = {run_id: _sequence(run_events) for run_id, run_events in by_run.items()}
    failures: list[VerifyFinding] = []
    inconclusive: list[VerifyFinding] = []
    requests = blocks_checked = 0
    for run_id, run in sequenced.items():
        _check_links(run, _sources(run_id, sequenced, forks or {}))
        failures += [replace(finding, run_id=run_id) for finding in run.failures]
        inconclusive += [replace(finding, run_id=run_id) for finding in run.inconclusive]
        requests += run.requests
        blocks_checked += run.blocks_checked
    stats = {"events": len(events), "requests": requests, "blocks_checked": blocks_checked}
    return VerifyResult(
        ok=not failures,
        failures=failures,
        inconclusive=inconclusive,
        stats=stats,
        runs=list(by_run),
    )


@dataclass(slots=True)
class _RunVerdict:
    by_seq: dict[int, JournalEvent] = field(default_factory=dict)
    accepted: list[JournalEvent] = field(default_factory=list)
    failures: list[VerifyFinding] = field(default_factory=list)
    inconclusive: list[VerifyFinding] = field(default_factory=list)
    requests: int = 0
    blocks_checked: int = 0


def _sequence(events: Sequence[JournalEvent]) -> _RunVerdict:
    """Check (1) over the events of one run, in journal order: the first event of a seq wins."""
    verdict = _RunVerdict()
    highest = 0
    for event in events:
        if event.seq in verdict.by_seq:
            verdict.failures.append(_finding(SEQ_NOT_MONOTONIC, "duplicate-sequence", event.seq))
            continue
        verdict.by_seq[event.seq] = event
        verdict.accepted.append(event)
        if event.seq < highest:
            verdict.failures.append(_finding(SEQ_NOT_MONOTONIC, "out-of-order-sequence", event.seq))
        highest = max(highest, event.seq)
    return verdict


def _sources(
    run_id: str, runs: Mapping[str, _RunVerdict], forks: Mapping[str, ForkedFrom]
) -> Mapping[int, JournalEvent]:
    """The events a reference of ``run_id`` may resolve to, by seq: its own, then, for a fork's
    child, its parent's at or below the fork point, and so on up the chain of forks (each
    ancestor's up to the lowest fork point below it). A parent the journal does not hold, or a
    chain that comes back to a run it passed, ends the chain."""
    own = runs[run_id].by_seq
    origin = forks.get(run_id)
    if origin is None:
        return own
    merged = dict(own)
    seen = {run_id}
    limit = origin.seq
    while origin is not None and origin.run_id in runs and origin.run_id not in seen:
        seen.add(origin.run_id)
        limit = min(limit, origin.seq)
        for seq, event in runs[origin.run_id].by_seq.items():
            if seq <= limit:
                merged.setdefault(seq, event)
        origin = forks.get(origin.run_id)
    return merged


def _check_links(verdict: _RunVerdict, sources: Mapping[int, JournalEvent]) -> None:
    """Checks (2) and (3) over one run's accepted events, resolving among ``sources``."""
    failures, inconclusive = verdict.failures, verdict.inconclusive
    for event in verdict.accepted:
        refs = _references(event)
        forward = [ref for ref in refs if ref >= event.seq]
        missing = sorted({ref for ref in refs if ref < event.seq and ref not in sources})
        if forward:
            failures.append(_finding(BROKEN_LINK, "forward-reference", event.seq))
        if missing:
            inconclusive.append(
                _finding(BROKEN_LINK, "missing-source", event.seq, missing=tuple(missing))
            )

    for event in verdict.accepted:
        if event.type != "llm/request":
            continue
        verdict.requests += 1
        for block in event.data.get("blocks") or []:
            verdict.blocks_checked += 1
            found = _check_block(event.seq, block, sources)
            if found is not None:
                (inconclusive if found.missing_seqs else failures).append(found)


def _finding(
    code: str, reason: str, seq: int, *, block: Any = None, missing: tuple[int, ...] = ()
) -> VerifyFinding:
    at = block if isinstance(block, dict) else {}
    return VerifyFinding(
        code=code,
        reason=reason,
        seq=seq,
        message_index=at.get("messageIndex"),
        block_index=at.get("blockIndex"),
        missing_seqs=missing,
    )


def _ints(value: Any) -> list[int]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, int) and not isinstance(item, bool)]


def _references(event: JournalEvent) -> list[int]:
    # Request blocks are checked in step 3, where a missing source is reported per block; their
    # forward references are still links that point the wrong way.
    refs = list(event.source_event_seqs or [])
    if event.type == "context/replace":
        dropped = event.data.get("dropped")
        if isinstance(dropped, dict):
            refs += _ints(dropped.get("sourceEventSeqs"))
        for replacement in event.data.get("replacements") or []:
            if isinstance(replacement, dict):
                refs += _ints(replacement.get("sourceEventSeqs"))
    if event.type == "llm/request":
        for block in event.data.get("blocks") or []:
            if isinstance(block, dict):
                refs += [r for r in _ints(block.get("sourceEventSeqs")) if r >= event.seq]
    return refs


def _check_block(seq: int, block: Any, by_seq: Mapping[int, JournalEvent]) -> VerifyFinding | None:
    lineage = block.get("sourceEventSeqs") if isinstance(block, dict) else None
    if lineage is None:
        return _finding(MISSING_CONTEXT_REPLACE, "no-lineage", seq, block=block)
    wanted = block.get("contentHash")
    missing: list[int] = []
    for ref in _ints(lineage):
        source = by_seq.get(ref)
        if source is None:
            missing.append(ref)
        elif wanted in _hashes_of(source, by_seq):
            return None
    if missing:
        return _finding(
            MISSING_CONTEXT_REPLACE, "source-unavailable", seq, block=block, missing=tuple(missing)
        )
    return _finding(MISSING_CONTEXT_REPLACE, "not-reproducible", seq, block=block)


def _hashes_of(source: JournalEvent, by_seq: Mapping[int, JournalEvent]) -> set[str]:
    blocks: list[Any] = []
    if source.type in _MESSAGE_TYPES:
        message = source.data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = [_recorded(block, by_seq) for block in content]
    elif source.type == "context/replace":
        for replacement in source.data.get("replacements") or []:
            if isinstance(replacement, dict) and "block" in replacement:
                blocks.append(replacement["block"])
    return {canonical_content_hash(block) for block in blocks}


def _recorded(block: Any, by_seq: Mapping[int, JournalEvent]) -> Any:
    """A journal-first results message's reference: the block of the ``tool/result`` it names.

    A reference the journal cannot resolve stays as it is (its hash then matches nothing).
    """
    if not isinstance(block, dict) or RECORDED_RESULT not in block:
        return block
    source = by_seq.get(block[RECORDED_RESULT])
    result = source.data.get("result") if source is not None else None
    if (
        source is None
        or source.type != "tool/result"
        or not isinstance(result, dict)
        or result.get("tool_use_id") != block.get("tool_use_id")
    ):
        return block
    return result

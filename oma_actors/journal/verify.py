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

One check is ours, not OMA's: a journal-first results message writes each tool output once, in
its ``tool/result``, and refers to it (``{"type": "tool_result", "tool_use_id": ..., "recorded":
seq}``). Such a reference is not a link OMA's JR-23 excuses: the output exists nowhere else, so a
target the run does not hold (``BROKEN_LINK/missing-recorded-result``), or one that is not that
call's ``tool/result`` (``BROKEN_LINK/wrong-recorded-result``), is a failure. Only a target below
the run's first held event stays an inconclusive gap, as an evicted or cut head (LM-32).
OMA's own links (``sourceEventSeqs``, a request block's lineage) keep OMA's rule.

An empty journal (or a missing JSONL file, which reads as one, JR-04) is ``ok`` with
``stats["events"] == 0`` and no ``runs``: ``ok`` is exactly "no failures" (JR-21), and zero
events prove nothing, so a caller that needs a run to have been verified checks the count
(``oma verify`` refuses it, exit 2).

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
MISSING_RECORDED_RESULT = "missing-recorded-result"
WRONG_RECORDED_RESULT = "wrong-recorded-result"
_MESSAGE_TYPES = ("user/message", "assistant/message")


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyFinding:
    """One finding: a failure, or an inconclusive gap.

    Attributes:
        code: ``SEQ_NOT_MONOTONIC``, ``BROKEN_LINK`` or ``MISSING_CONTEXT_REPLACE``.
        reason: ``duplicate-sequence``, ``out-of-order-sequence``, ``forward-reference``,
            ``missing-source`` (inconclusive), ``missing-recorded-result`` and
            ``wrong-recorded-result`` (a journal-first results message's reference to its
            ``tool/result`` is unresolved: that tool output is lost), ``no-lineage``,
            ``source-unavailable`` (inconclusive), ``not-reproducible``.
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

    ``ok`` says nothing was found wrong, not that anything was checked: an empty journal (a
    missing JSONL file reads as one) is ``ok`` with ``stats["events"] == 0`` and no ``runs``.

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

    Returns:
        ``ok`` when there is no failure (JR-21). A journal with no event (an empty or missing
        JSONL file) is ``ok`` too, with ``stats["events"] == 0``: check that count when the
        journal is expected to hold a run.

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
    first = min(verdict.by_seq, default=0)
    for event in verdict.accepted:
        lost = _check_recorded(event, verdict.by_seq, first, failures)
        refs = _references(event)
        forward = [ref for ref in refs if ref >= event.seq]
        # A seq already failed as a lost recorded result is not also an inconclusive gap.
        missing = sorted(
            {ref for ref in refs if ref < event.seq and ref not in sources and ref not in lost}
            | {ref for ref in _recorded_seqs(event) if ref < first}
        )
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


def _check_recorded(
    event: JournalEvent, own: Mapping[int, JournalEvent], first: int, failures: list[VerifyFinding]
) -> set[int]:
    """Fail every ``recorded`` reference of ``event`` that does not resolve; the seqs lost.

    Its target is always an event of the same run (the attempt that wrote the message wrote the
    ``tool/result``), so it resolves among ``own`` only. A target below ``first`` (the run's
    lowest held seq) is left to the caller: a lost head is inconclusive, as in OMA.
    """
    absent: set[int] = set()
    wrong = False
    for block in _recorded_blocks(event):
        ref = block[RECORDED_RESULT]
        if not _is_int(ref) or ref >= event.seq:
            wrong = True  # a message refers only to a result written before it
        elif ref not in own:
            if ref >= first:
                absent.add(ref)
        elif not _is_recorded_result(block, own[ref]):
            wrong = True
    if absent:
        failures.append(
            _finding(BROKEN_LINK, MISSING_RECORDED_RESULT, event.seq, missing=tuple(sorted(absent)))
        )
    if wrong:
        failures.append(_finding(BROKEN_LINK, WRONG_RECORDED_RESULT, event.seq))
    return absent


def _recorded_blocks(event: JournalEvent) -> list[dict[str, Any]]:
    """The reference blocks (``RECORDED_RESULT``) of a message event's content."""
    if event.type not in _MESSAGE_TYPES:
        return []
    message = event.data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict) and RECORDED_RESULT in block]


def _recorded_seqs(event: JournalEvent) -> list[int]:
    return [ref for b in _recorded_blocks(event) if _is_int(ref := b[RECORDED_RESULT])]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_recorded_result(block: dict[str, Any], source: JournalEvent) -> bool:
    """Whether ``source`` is the ``tool/result`` holding the result ``block`` refers to."""
    result = source.data.get("result")
    return (
        source.type == "tool/result"
        and isinstance(result, dict)
        and result.get("tool_use_id") == block.get("tool_use_id")
    )


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
    ref = block[RECORDED_RESULT]
    source = by_seq.get(ref) if _is_int(ref) else None  # a list is no key: never raise on it
    if source is None or not _is_recorded_result(block, source):
        return block
    return source.data["result"]

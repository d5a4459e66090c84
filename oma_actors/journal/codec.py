"""One journal line <-> one ``JournalEvent``, in OMA's JSONL form (spec 17.2, JR-04).

A line is the event object as ``JSON.stringify`` writes it, no spaces, no trailing newline here,
its keys in the order OMA's recorder builds the object (``JournalRecorder.emit`` in
``packages/core/src/journal/journal.ts``: ``{...draft, seq, timestampUnixMs, runId, attempt,
...(traceId)}``, the draft being the emitter's ``{type, ...scope, <payload>,
...(sourceEventSeqs)}``; the runner's scope is ``taskId``, ``agentName``, ``spanId``):

``type``, ``taskId``, ``agentName``, ``spanId`` when set, then the variant's own fields in the
order the variant declares them (see ``vocabulary``), ``sourceEventSeqs`` when set, then the
fields the recorder stamps: ``seq``, ``timestampUnixMs``, ``runId``, ``attempt``, and
``traceId`` (when tracing is on) last. For example
``{"type":"turn/start","taskId":"t","agentName":"w","turn":1,"seq":7,"timestampUnixMs":1,
"runId":"r","attempt":1}``. Absent optional fields are left out, as ``JSON.stringify`` drops
``undefined`` members; an explicit ``null`` is kept. The order lives in ``to_json_object``
alone.

Journals written by earlier versions of this module put the base fields first
(``{"type":...,"seq":N,"timestampUnixMs":T,"runId":"...","attempt":A,...}``); they read as
any other line, and the peeks below (``peek_seq``, ``peek_run``) know both layouts.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, TypeGuard

import orjson

from oma_actors.journal.errors import JournalCorruptError
from oma_actors.journal.event import JournalEvent
from oma_actors.journal.jsjson import js_dumps
from oma_actors.jsontext import has_long_digits, loads, reject_constant

if TYPE_CHECKING:
    from collections.abc import Sequence

EVENT_TYPES = frozenset(
    {
        "run/start",
        "run/end",
        "plan/set",
        "task/status",
        "turn/start",
        "turn/end",
        "user/message",
        "assistant/message",
        "llm/request",
        "tool/call",
        "tool/result",
        "context/replace",
        "memory/set",
        "approval/request",
        "approval/decision",
        "checkpoint/saved",
    }
)
"""Every event type of OMA's vocabulary; ``parse_line`` refuses any other (as ``isRunEvent``)."""

BASE_KEYS = frozenset(
    {
        "seq",
        "timestampUnixMs",
        "runId",
        "attempt",
        "taskId",
        "agentName",
        "traceId",
        "spanId",
        "type",
        "sourceEventSeqs",
    }
)
"""The keys ``JournalEvent`` holds as attributes; every other key lives in ``data``."""


def to_json_object(event: JournalEvent) -> dict[str, Any]:
    """The event as OMA's JSON object, keys in line order (see the module docstring)."""
    out: dict[str, Any] = {"type": event.type}
    if event.task_id is not None:
        out["taskId"] = event.task_id
    if event.agent_name is not None:
        out["agentName"] = event.agent_name
    if event.span_id is not None:
        out["spanId"] = event.span_id
    for key, value in event.data.items():
        if key in BASE_KEYS:
            raise ValueError(f"data of event {event.seq} repeats the base field {key!r}")
        out[key] = value
    if event.source_event_seqs is not None:
        out["sourceEventSeqs"] = list(event.source_event_seqs)
    out["seq"] = event.seq
    out["timestampUnixMs"] = event.timestamp_unix_ms
    out["runId"] = event.run_id
    out["attempt"] = event.attempt
    if event.trace_id is not None:
        out["traceId"] = event.trace_id
    return out


def to_json_line(event: JournalEvent) -> str:
    """The event's JSONL line without the newline, byte for byte what OMA writes."""
    return js_dumps(to_json_object(event))


def parse_line(text: str, *, line: int = 0, path: str = "<journal>") -> JournalEvent:
    """Read one journal line, strictly.

    The line is read by ``jsontext.loads``: orjson (C, about 2.5x the ``json`` module) where
    that gives the very value ``json`` would, the ``json`` module (and its error) otherwise; a
    database journal's rows are read so too.

    Args:
        text: the line, without its newline.
        line: its 1-based line number, for the error.
        path: the journal it came from, for the error.

    Raises:
        JournalCorruptError: the line is not a JSON object, or a base field is missing or of the
            wrong type, or the event type is unknown. The error names the line and the field.
    """
    return _parse(text, line, path)


def parse_line_bytes(data: bytes, *, line: int = 0, path: str = "<journal>") -> JournalEvent:
    """``parse_line(data.decode(), ...)``: the same event, or the same error (P5).

    Raises:
        JournalCorruptError: as ``parse_line``.
        UnicodeDecodeError: the line is not UTF-8.
    """
    return _parse(data, line, path)


def parse_lines_bytes(lines: Sequence[bytes], *, path: str = "<journal>") -> list[JournalEvent]:
    """``[parse_line_bytes(line, path=path) for line in lines]``: the same events, or the same
    first error (P5: a restore reads thousands of lines).

    ``exact_loads`` checks each text for long digit runs before orjson reads it; here one check
    covers a group of lines (``has_long_digits`` of them joined by a newline), and orjson then
    reads each line directly. A line orjson refuses, or that is not an object, goes through
    ``parse_line_bytes`` itself, which reads it as ``json`` would or names what is wrong; so
    does every line when any holds a long digit run.

    The groups are ``_CHECKED_TOGETHER`` lines: joined whole, a 1000-turn tail was a megabyte
    joined and another translated, in fresh memory (about 170 page faults, 0.4 ms of a fresh
    process's restore, P5); a group's buffers are reused.

    Raises:
        JournalCorruptError: as ``parse_line``.
        UnicodeDecodeError: a line is not UTF-8.
    """
    group = _CHECKED_TOGETHER
    if any(
        has_long_digits(b"\n".join(lines[start : start + group]))
        for start in range(0, len(lines), group)
    ):
        return [_parse(line, 0, path) for line in lines]
    events: list[JournalEvent] = []
    for line in lines:
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError:
            raw = None
        events.append(
            _event_of(raw, line=0, path=path) if type(raw) is dict else _parse(line, 0, path)
        )
    return events


_CHECKED_TOGETHER = 64
"""Lines ``parse_lines_bytes`` checks for long digit runs in one call (a few dozen KiB)."""


def _parse(data: str | bytes, line: int, path: str) -> JournalEvent:
    try:
        raw = loads(data, parse_constant=reject_constant)
    except UnicodeDecodeError:
        raise  # not a text line at all: the caller tells that from a line that is no JSON
    except (ValueError, RecursionError) as exc:
        raise JournalCorruptError(path, line, "json", f"not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise JournalCorruptError(path, line, "json", "not a JSON object")
    return _event_of(raw, line=line, path=path)


def from_json_object(
    raw: dict[str, Any], *, line: int = 0, path: str = "<journal>"
) -> JournalEvent:
    """Build an event from a parsed JSON object, with the checks of ``parse_line``."""
    return _event_of(dict(raw), line=line, path=path)


def _event_of(raw: dict[str, Any], *, line: int, path: str) -> JournalEvent:
    """``from_json_object`` of an object the caller gives up: its base keys are popped off
    and the rest becomes ``data`` as it is (a restore parses thousands of lines: no copy).

    This runs once per line read, so a line as the recorder writes it takes one test of exact
    types (``type(x) is int`` holds for no ``bool``); anything else (a missing or mistyped
    field, a subclass) is judged by ``_checked``, whose checks and errors are
    ``from_json_object``'s, in its order.
    """
    pop = raw.pop
    seq = pop("seq", None)
    kind = pop("type", None)
    stamp = pop("timestampUnixMs", None)
    run_id = pop("runId", None)
    attempt = pop("attempt", None)
    task_id = pop("taskId", _ABSENT)
    agent_name = pop("agentName", _ABSENT)
    trace_id = pop("traceId", _ABSENT)
    span_id = pop("spanId", _ABSENT)
    sources = pop("sourceEventSeqs", None)
    if (
        type(seq) is not int
        or seq < 1
        or kind not in EVENT_TYPES
        or type(stamp) is not int
        or type(run_id) is not str
        or type(attempt) is not int
        or attempt < 1
    ):
        _checked(seq, kind, stamp, run_id, attempt, line, path)
    # Absent optional strings are None; a present one must be a string (so must not be null).
    if task_id is _ABSENT:
        task_id = None
    elif type(task_id) is not str:
        task_id = _string("taskId", task_id, line, path)
    if agent_name is _ABSENT:
        agent_name = None
    elif type(agent_name) is not str:
        agent_name = _string("agentName", agent_name, line, path)
    if trace_id is not _ABSENT or span_id is not _ABSENT:
        trace_id = _optional("traceId", trace_id, line, path)
        span_id = _optional("spanId", span_id, line, path)
    else:
        trace_id = span_id = None
    if sources is not None:
        if type(sources) is list:
            for source in sources:  # a loop: ``all`` over a generator cost more than the rest
                if type(source) is not int:
                    sources = _seqs(sources, line, path)
                    break
        else:
            sources = _seqs(sources, line, path)
    # The slots set directly: the frozen dataclass's ``__init__`` (one ``object.__setattr__``
    # per field) was 1.8 us of an event's 2.8 us past orjson, profiled on a 1000-turn history
    # read; this is about 0.6 us, the same event (``tests/journal/test_journal_parse_bytes.py``
    # compares them). What is left of ``raw`` is the variant's own fields, in line order.
    event: JournalEvent = _new(JournalEvent)
    _set_seq(event, seq)
    _set_type(event, kind)
    _set_run_id(event, run_id)
    _set_attempt(event, attempt)
    _set_stamp(event, stamp)
    _set_task_id(event, task_id)
    _set_agent_name(event, agent_name)
    _set_trace_id(event, trace_id)
    _set_span_id(event, span_id)
    _set_sources(event, sources)
    _set_data(event, raw)
    return event


def _checked(
    seq: Any, kind: Any, stamp: Any, run_id: Any, attempt: Any, line: int, path: str
) -> None:
    """The base fields' checks of ``from_json_object``, in its order (a subclass passes).

    Raises:
        JournalCorruptError: the first field that fails, named.
    """
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise JournalCorruptError(path, line, "seq", f"must be a positive integer, got {seq!r}")
    if kind not in EVENT_TYPES:
        raise JournalCorruptError(path, line, "type", f"unknown event type {kind!r}")
    if not isinstance(stamp, int) or isinstance(stamp, bool):
        raise JournalCorruptError(
            path, line, "timestampUnixMs", f"must be an integer, got {stamp!r}"
        )
    if not isinstance(run_id, str):
        raise JournalCorruptError(path, line, "runId", f"must be a string, got {run_id!r}")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise JournalCorruptError(
            path, line, "attempt", f"must be a positive integer, got {attempt!r}"
        )


def _string(name: str, value: Any, line: int, path: str) -> str:
    """A present optional field that is no exact ``str``: a subclass passes.

    Raises:
        JournalCorruptError: it is not a string (``null`` included).
    """
    if not isinstance(value, str):
        raise JournalCorruptError(path, line, name, f"must be a string, got {value!r}")
    return value


def _optional(name: str, value: Any, line: int, path: str) -> str | None:
    return None if value is _ABSENT else _string(name, value, line, path)


def _seqs(sources: Any, line: int, path: str) -> list[int]:
    """``sourceEventSeqs`` that is not a list of exact ints: a list of int subclasses passes.

    Raises:
        JournalCorruptError: it is not a list of integers.
    """
    if not (isinstance(sources, list) and all(_is_int(s) for s in sources)):
        raise JournalCorruptError(
            path, line, "sourceEventSeqs", f"must be a list of integers, got {sources!r}"
        )
    return sources


_SLOTS = (
    "seq",
    "type",
    "run_id",
    "attempt",
    "timestamp_unix_ms",
    "task_id",
    "agent_name",
    "trace_id",
    "span_id",
    "source_event_seqs",
    "data",
)


def slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The slot setters of dataclass ``cls``, one per field, in the order ``names`` lists them.

    Raises:
        TypeError: ``names`` is not the list of ``cls``'s fields in order (a field added to
            ``JournalEvent`` and not here would be left unset by ``_event_of``).
    """
    fields = tuple(f.name for f in dataclasses.fields(cls))
    if fields != names:
        raise TypeError(f"{cls.__name__} has the fields {fields}, not {names}")
    return tuple(vars(cls)[name].__set__ for name in names)


(
    _set_seq,
    _set_type,
    _set_run_id,
    _set_attempt,
    _set_stamp,
    _set_task_id,
    _set_agent_name,
    _set_trace_id,
    _set_span_id,
    _set_sources,
    _set_data,
) = slot_setters(JournalEvent, _SLOTS)
_new = object.__new__


_ABSENT: Any = object()


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# Peeking at a line: its seq and run id without parsing it (a restore skips the lines of other
# runs and below its seq unparsed). A line as OMA writes it (the module docstring) ends with the
# fields the recorder stamps: ``,"seq":N,"timestampUnixMs":T,"runId":"...","attempt":A`` and
# maybe ``,"traceId":"..."``, then ``}``. The last ``,"seq":`` of a line (``bytes.rfind``) is
# where that tail starts, and a tail pattern matched from there to the line's end reads the
# top-level fields, whatever the payload before it holds:
# - its ``,`` is no string's: inside a JSON string every ``"`` is escaped (``\"``), so a ``,``
#   followed by ``"`` is outside any string, or its string's last character, and then ``seq``
#   would follow the string's closing quote, which is no JSON;
# - the matched tail holds no bracket or brace outside its strings but its closing ``}``, which
#   ends the line: so its ``,"seq":`` sits at the depth of that ``}``, the top level;
# - and nothing after it repeats a key: when a line has a key twice, a JSON parse takes the
#   last one, which is the tail's.
# So on a line that is JSON (a line of another run is never parsed, as before), a tail match
# gives the very seq and run id its parse would. Lines written by earlier versions of this
# module start with these fields instead (``{"type":...,"seq":N,"timestampUnixMs":T,
# "runId":"...",``): the head patterns read those, as a second try (anchored at the line's
# start, right after ``type``: top-level fields too). A line matching neither is only read by
# its parse.

SEQ_KEY = b',"seq":'
"""Where the stamped fields start in a line as OMA writes it: its last occurrence."""

_STRING = rb'[^"\\]*+(?:\\.[^"\\]*+)*+'
"""A JSON string's body between its quotes, escapes included (possessive: no backtracking)."""

TAIL = re.compile(
    rb',"seq":(\d{1,18}+),"timestampUnixMs":-?\d{1,18}+,"runId":"(' + _STRING + rb')",'
    rb'"attempt":\d{1,18}+(?:,"traceId":"' + _STRING + rb'")?+\}'
)
"""The end of a line as this module and OMA write it, from its last ``SEQ_KEY`` (``fullmatch``
at that offset); groups: the seq and the run id, as the line spells them (escapes included:
compare with ``spelled_run_id``). With its ``rfind``, about 1.1x ``PLAIN_HEAD``'s cost on a line
of either layout (a 1000-turn run's lines); possessive, it fails fast on an earlier layout's."""

TYPE_PREFIX = re.compile(rb'\{"type":"([^"\\]{1,64})",')
"""The start of a line as this module and OMA write it (both layouts); group: the event type."""

_SEQ_PREFIX = re.compile(rb'\{"type":"[^"\\]{1,64}","seq":(\d{1,18}),')
_TYPE_HEAD = re.compile(r'\{"type":"([^"\\]{1,64})",')


def line_type(text: str) -> str | None:
    """The event type a line shows at its start (``{"type":"...",``, as this module and OMA
    write lines, in either layout), without parsing it; ``None``: the line starts otherwise
    (another writer's key order, an escape in the type): only its parse can tell."""
    found = _TYPE_HEAD.match(text)
    return None if found is None else found[1]


def peek_seq(line: bytes) -> int | None:
    """The seq of a JSONL line, without parsing it (``None``: not shown).

    Read from the fields the line ends with, as this module and OMA write lines
    (``...,"seq":N,"timestampUnixMs":T,"runId":"...","attempt":A}``), or else from its start as
    earlier versions wrote them (``{"type":...,"seq":N,``); a reader that needs only the events
    above some seq skips the others unparsed.
    """
    at = line.rfind(SEQ_KEY)
    if at >= 0 and (found := TAIL.fullmatch(line, at)) is not None:
        return int(found[1])
    found = _SEQ_PREFIX.match(line)
    return None if found is None else int(found[1])


_RUN_PREFIX = re.compile(
    rb'\{"type":"([^"\\]{1,64})","seq":(\d{1,18}),"timestampUnixMs":-?\d{1,18},'
    rb'"runId":"((?:[^"\\]|\\.){0,1024})"[,}]'
)


PLAIN_HEAD = re.compile(
    rb'\{"type":"([^"\\]{1,64})","seq":(\d{1,18}),"timestampUnixMs":-?\d{1,18},'
    rb'"runId":"([^"\\]{0,1024})"[,}]'
)
"""The start of a line as earlier versions of this module wrote it (base fields first), for a
run id without escapes (every run id a restore scans for); groups: the event type, the seq and
the run id, as the line spells them. ``_RUN_PREFIX`` where it matches, and about 2.5x cheaper
than it (P5's backward scan). A line it does not match is in another layout (today's:
``TAIL``), or spells its run id with escapes (``peek_run`` reads those)."""


def peek_run(line: bytes) -> tuple[int, bytes] | None:
    """The seq and the run id (as the line spells it) of a JSONL line, without parsing it.

    Read from the fields the line ends with, as this module and OMA write lines
    (``...,"seq":N,"timestampUnixMs":T,"runId":"...","attempt":A}``, maybe with ``traceId``
    last), or else from its start as earlier versions wrote them
    (``{"type":...,"seq":N,"timestampUnixMs":T,"runId":"...",``). ``None``: neither. Compare
    the run id with ``spelled_run_id(run_id)``.
    """
    at = line.rfind(SEQ_KEY)
    if at >= 0 and (found := TAIL.fullmatch(line, at)) is not None:
        return int(found[1]), found[2]
    found = PLAIN_HEAD.match(line) or _RUN_PREFIX.match(line)
    return None if found is None else (int(found[2]), found[3])


def spelled_run_id(run_id: str) -> bytes:
    """``run_id`` as a journal line spells it between its quotes (JSON escapes included)."""
    return js_dumps(run_id)[1:-1].encode()

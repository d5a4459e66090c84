"""Finding one run's lines in a JSONL journal without parsing the other lines (issue 19 item 4).

A journal file may hold many runs (they share its batches, D10), and a restore needs only its
run's events above a seq, which sit at the end of the file. ``scan_run`` reads the file
backwards from its end, chunk by chunk, reading only each line's seq and run id where the line
shows them unparsed (``codec``: the fields a line as OMA writes it ends with, ``TAIL``, or
the start of a line an earlier version wrote, ``PLAIN_HEAD``), and stops at the **seek point**:
the last line of the run below the seq asked for. A run's seqs strictly increase in file order,
so nothing before that line is wanted.

The seek point is verified, and anything unexpected gives ``None`` (the caller then reads and
checks the whole file, as before):

- the seek point's seq must be exactly ``start - 1``: a line of the run above it that was written
  before it (damage: the run's order broken) is then found by the whole-file read and shown to
  the fold, as it always was. (Damage wholly below a sound seek point is not looked for, as a
  database journal's ``seq >= ?`` query does not look below it either.)
- a line in neither layout (another writer's key order), a line that spells its run id with
  escapes otherwise than ``spelled_run_id`` spells the run's (it may be the run's), or a line of
  the run whose type does not show at its start, is not guessed at;
- the last line of the file is parsed whatever its run: a torn trailing line (a crash mid-write,
  D6) counts as not written, exactly as for the whole-file read.

``RunDirectory`` answers "does this run have any line at all?" for a run starting on a shared
journal: a fresh run would otherwise read the whole file backwards to find nothing. It is a
cache of what one scan of the file showed (the run ids present up to a byte offset), checked
against the file before each use: the same inode, and its first bytes and the bytes just before
the offset as they were (a file replaced, truncated or rewritten from its start is scanned
again). A rewrite in place of bytes in the middle only, keeping both probes, is not seen.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oma_actors.journal.codec import (
    PLAIN_HEAD,
    SEQ_KEY,
    TAIL,
    TYPE_PREFIX,
    parse_line,
    peek_run,
)
from oma_actors.journal.errors import JournalCorruptError

if TYPE_CHECKING:
    from collections.abc import Iterator

_FIRST_CHUNK = 64 * 1024
_MAX_CHUNK = 4 * 1024 * 1024
_PROBE = 4096
"""Bytes at the start of a file and before a directory's offset kept to recognise the file."""


Line = tuple[int, bytes]
"""A line ``scan_run`` found: its seq and its bytes."""


def scan_run(
    fd: int,
    size: int,
    run: bytes,
    start: int,
    path: str,
    kinds: frozenset[bytes] | None = None,
) -> list[Line] | None:
    """The lines of run ``run`` (as ``spelled_run_id`` spells it) with ``seq >= start``, of
    one of the event types ``kinds`` (as lines spell them; ``None``: any).

    In file order; a torn trailing line is left out. ``None``: the scan cannot vouch for its
    answer (see the module docstring) and the caller must read the whole file.
    """
    found: list[Line] = []
    last = True  # the next non-empty line seen (going backwards) is the file's last one
    # One ``rfind`` and one match a line (the tail: the layout we write); the head of the
    # layout earlier versions wrote only where the tail does not match. A line's type is read
    # only when ``kinds`` asks, for the run's own lines (a restore asks for every type).
    tail, head, typed = TAIL.fullmatch, PLAIN_HEAD.match, TYPE_PREFIX.match
    for line in _lines_backwards(fd, size):
        if last:
            if not line.strip():
                continue
            last = False
            if _torn(line, path):
                continue  # not written (D6)
        at = line.rfind(SEQ_KEY)
        matched = None if at < 0 else tail(line, at)
        if matched is not None:
            digits, owner = matched.groups()
            if owner != run:
                if b"\\" in owner:
                    return None  # maybe the run's id, spelled with other escapes
                continue  # another run's line, skipped unparsed
            kind = None
        else:
            matched = head(line)
            if matched is None:
                if not line.strip():
                    continue  # an empty line (never a match)
                return None  # in neither layout, or a run id spelled with escapes
            kind, digits, owner = matched.groups()
            if owner != run:
                continue  # another run's line, skipped unparsed
        seq = int(digits)
        if seq >= start:
            if kinds is not None:
                if kind is None:
                    shown = typed(line)
                    if shown is None:
                        return None  # its type spelled with escapes, or not first
                    kind = shown[1]
                if kind not in kinds:
                    continue
            found.append((seq, line))
            continue
        # The seek point: the run's last line below ``start``.
        if seq != start - 1:
            return None
        break
    found.reverse()  # at the seek point, or the whole file seen: what a whole-file read finds
    return found


def _torn(line: bytes, path: str) -> bool:
    try:
        parse_line(line.decode(), path=path)
    except (JournalCorruptError, UnicodeDecodeError):
        return True
    return False


def _lines_backwards(fd: int, size: int) -> Iterator[bytes]:
    """The lines of ``fd``'s first ``size`` bytes, last first, read in growing chunks."""
    pos, chunk, carry = size, _FIRST_CHUNK, b""
    while pos > 0:
        n = min(chunk, pos)
        pos -= n
        chunk = min(chunk * 2, _MAX_CHUNK)
        parts = (os.pread(fd, n, pos) + carry).split(b"\n")
        carry = parts[0]  # may continue in the chunk before
        yield from reversed(parts[1:])
    yield carry


@dataclass(slots=True)
class RunDirectory:
    """The run ids a journal file holds up to ``offset`` (see the module docstring)."""

    inode: tuple[int, int] = (0, 0)
    offset: int = 0
    head: bytes = b""
    probe: bytes = b""
    runs: set[bytes] = field(default_factory=set)

    def holds(self, fd: int, info: os.stat_result, run: bytes) -> bool | None:
        """Whether the file has a line of ``run``; ``None``: unknown (a line is not in the
        written layout, so the directory cannot vouch for an absence)."""
        if not self._valid(fd, info):
            self.inode, self.offset, self.head, self.probe = (info.st_dev, info.st_ino), 0, b"", b""
            self.runs = set()
        if not self._extend(fd, info.st_size):
            self.offset, self.head, self.probe, self.runs = 0, b"", b"", set()
            return None
        return run in self.runs

    def _valid(self, fd: int, info: os.stat_result) -> bool:
        if (info.st_dev, info.st_ino) != self.inode:
            return False
        return os.pread(fd, len(self.head), 0) == self.head and (
            os.pread(fd, len(self.probe), self.offset - len(self.probe)) == self.probe
        )

    def _extend(self, fd: int, size: int) -> bool:
        # Complete lines only (a line still being written is read next time), in chunks.
        while self.offset < size:
            data = os.pread(fd, min(size - self.offset, _MAX_CHUNK), self.offset)
            end = data.rfind(b"\n") + 1
            if end == 0:
                if self.offset + len(data) < size:  # a line longer than a chunk: unusual
                    return False
                break
            for line in data[:end].split(b"\n"):
                if not line.strip():
                    continue
                peeked = peek_run(line)
                if peeked is None or b"\\" in peeked[1]:
                    return False
                self.runs.add(peeked[1])
            self.offset += end
        if self.offset:
            probe = min(_PROBE, self.offset)
            self.probe = os.pread(fd, probe, self.offset - probe)
            if not self.head:
                self.head = os.pread(fd, probe, 0)
        return True

"""Redacting a journal's events as they are written (``redact=`` of the JSONL and database
journals): the payload alone, by ``RedactingStore``'s rules plus the journal's patterns.

The base fields (run id, seq, type, task, agent) are never redacted: a line or row must keep
naming its run and its place. A payload that is one sealed envelope is left alone: the sealing
journal redacted it before it sealed it (``EncryptingJournal.seal``), and a pattern as broad as
``[A-Za-z0-9+/]{20,}`` would match the envelope's base64, after which it never opens again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.stores.keyring import is_envelope
from oma_actors.stores.redaction import redact_tree

if TYPE_CHECKING:
    import re
    from collections.abc import Sequence

    from oma_actors.journal.event import JournalEvent


def redacted_event(event: JournalEvent, patterns: Sequence[re.Pattern[str]] | None) -> JournalEvent:
    """``event`` with its payload redacted by ``patterns`` (compiled, the built-in rules
    applied too), or as it is when ``patterns`` is ``None`` or the payload is sealed."""
    if patterns is None or is_sealed_event(event):
        return event
    return replace(event, data=redact_tree(event.data, patterns))


def is_sealed_event(event: JournalEvent) -> bool:
    """Whether ``event``'s payload is one sealed envelope, as ``EncryptingJournal`` hands it on.

    A redacting journal leaves such a payload alone (see the module docstring).
    """
    data = event.data
    if len(data) != 1:
        return False
    envelope = data.get("sealed")
    return isinstance(envelope, str) and is_envelope(envelope)

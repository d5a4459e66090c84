"""The facts a runner's turn loop reports with a boundary, as they happen (decision D14).

The journal records a run's facts where they happen, never by diffing two states: the loop
knows what it just did (a call dispatched, a result committed) and hands that fact to the
boundary hook together with the state it produced. The run's journal writes it in OMA's
vocabulary (``tool/call``, ``tool/result``), at the moment the run adopts that state, so the
snapshot's watermark and its in-flight entries always agree (JR-08).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from oma_actors.domain.inflight import ToolCommit
    from oma_actors.domain.messages import ToolUseBlock

__all__ = ["CallCommitted", "CallDispatched", "Fact", "Facts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallDispatched:
    """An ``unsafe`` call is about to run; its dispatch must be durable first (decision D1).

    Attributes:
        call: the call as the model issued it (an approval's edits are not part of it).
    """

    call: ToolUseBlock


@dataclass(frozen=True, slots=True, kw_only=True)
class CallCommitted:
    """A call's result was committed (run, denied, settled unknown or rejected).

    Attributes:
        call: the call as the model issued it.
        commit: its result block, its record and any delegated usage.
    """

    call: ToolUseBlock
    commit: ToolCommit


Fact: TypeAlias = CallDispatched | CallCommitted
Facts: TypeAlias = tuple[Fact, ...]

"""A stranded task's entry keeps no pending call (``checkpoint.stranded._failed``).

The guard: a task stranded by a call its entry does not hold ends ``completed`` with
``pending=()``. Its entry may still hold an earlier, uncommitted call (the snapshot was taken
while ``tu-1`` waited, and the lost tail ran it and issued ``tu-9``). Kept, that call would sit
in a completed entry, which no checkpoint can hold: the codec writes no ``pendingToolCalls``
outside ``executing_tools`` and refuses to encode the entry, so every save of the restored run
holding it would fail.
"""

from __future__ import annotations

import json

from checkpoint_support import KEY
from fold_support import executing, journaled

from oma_actors.checkpoint import decode, encode
from oma_actors.checkpoint.stranded import strand_unresumable
from oma_actors.checkpoint.validate import problem
from oma_actors.journal.fold import StartedCall


def test_a_stranded_entry_drops_its_pending_calls_and_stays_a_valid_checkpoint() -> None:
    """Guard: ``pending=()`` in ``_failed``."""
    snapshot = journaled(executing())  # b waits on tu-1, not yet committed
    lost = StartedCall(task_id="b", agent_name="worker", call_id="tu-9", seq=150, has_result=False)
    changed, stranded = strand_unresumable(snapshot, [lost])
    assert [call.call_id for call in stranded] == ["tu-9"]
    [b] = changed.in_flight
    assert (b.state.phase, b.state.success, b.state.retryable) == ("completed", False, False)
    assert b.state.pending == ()
    text = encode(changed)
    assert problem(json.loads(text)) is None
    assert decode(text, key=KEY).in_flight[0].state == b.state

"""A value that is not a content block is never written into a snapshot as ``null``.

``block_from_json`` refuses a ``null`` block, so a snapshot holding one could not be restored:
the run would be lost. The codec refuses such a value with a typed ``CheckpointError`` before
anything is written, so the save is ``NotSaved`` and the latest snapshot stays the last good one.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from acceptance_helpers import answer

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team
from oma_actors.checkpoint import checkpoint_key
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.run_writer import NotSaved, RunWriter
from oma_actors.domain.jsonforms import block_to_json
from oma_actors.errors import CheckpointError
from oma_actors.events import CheckpointSaveFailed, ProgressEvent
from oma_actors.llm import Message
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "run-foreign-block"


@pytest.mark.parametrize("block", [{"type": "text", "text": "raw"}, None])
def test_a_foreign_block_has_no_json_form(block: object) -> None:
    with pytest.raises(CheckpointError, match=f"not a content block: {type(block).__name__}"):
        block_to_json(block)  # type: ignore[arg-type]


async def test_a_snapshot_holding_a_foreign_block_leaves_the_stored_one_as_it_was() -> None:
    store = InMemoryStore()
    squad = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(lambda m, o: answer("done")))])
    await OpenMultiAgent().run_tasks(
        squad, [Task("one", "1", id="t1")], checkpoint=CheckpointOptions(store=store, run_id=RUN)
    )
    checkpoint = Checkpoint(store, key=checkpoint_key(RUN), run_id=RUN)
    good = await checkpoint.load_latest()
    assert good is not None
    stored = await store.get(checkpoint_key(RUN))
    [done] = good.completed
    assert done.agent_result is not None
    *earlier, last = done.agent_result.messages
    foreign = Message(last.role, [*last.content, {"type": "text", "text": "raw"}])  # type: ignore[list-item]
    result = replace(done.agent_result, messages=[*earlier, foreign])
    bad = replace(good, completed=(replace(done, agent_result=result),))

    events: list[ProgressEvent] = []
    writer = RunWriter(checkpoint, emit=events.append, revision=good.revision)
    outcome = await writer.save(bad, boundary="task_completed")
    assert isinstance(outcome, NotSaved), outcome
    assert "not a content block: dict" in outcome.error
    assert [e.error for e in events if isinstance(e, CheckpointSaveFailed)] == [outcome.error]
    assert await store.get(checkpoint_key(RUN)) == stored  # nothing was written
    assert await checkpoint.load_latest() == good  # and the run is still restorable

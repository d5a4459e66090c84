"""Child process: a leased run whose store kills the process right after the write that moved
the run record to a new checkpoint (``os._exit``, no cleanup): what survives is what that one
store operation made durable.

argv: the SQLite state file.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.keyspace import RUN_KEY_PREFIX
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.runs import MemoryStoreRunStore
from oma_actors.stores import SqliteStore
from oma_actors.stores.base import Put
from oma_actors.testing import ForwardingStore, ScriptedAdapter

CRASH_EXIT = 9


def _moves_the_record(key: str, value: str) -> bool:
    return key.startswith(RUN_KEY_PREFIX) and json.loads(value).get("checkpointRef") is not None


class DiesAfterTheRecordMoves(ForwardingStore):
    """Forwards every write, then exits the process once one moved the run record."""

    async def _compare_and_set(self, key: str, expected: str | None, value: str,
                               metadata: Any = None) -> bool:  # fmt: skip
        written = await super()._compare_and_set(key, expected, value, metadata)
        if written and _moves_the_record(key, value):
            os._exit(CRASH_EXIT)
        return written

    async def _apply(self, checks: Sequence[Any], writes: Sequence[Any]) -> bool:
        written = await super()._apply(checks, writes)
        if written and any(
            isinstance(w, Put) and _moves_the_record(w.key, w.value) for w in writes
        ):
            os._exit(CRASH_EXIT)
        return written


async def main(path: str) -> None:
    async with SqliteStore(path) as inner:
        store = DiesAfterTheRecordMoves(inner)
        team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(
            lambda messages, options: LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))
        ))])  # fmt: skip
        await OpenMultiAgent(run_store=MemoryStoreRunStore(store)).run_tasks(
            team, [Task("a", "x")], checkpoint=CheckpointOptions(store=store, run_id="r1")
        )
    print("the run ended without the record ever moving", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

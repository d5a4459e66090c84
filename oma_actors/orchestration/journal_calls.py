"""Journal a conversation outside the task queue: the coordinator's calls and ``run_agent``'s.

OMA journals every model call of a run, not only the queue's tasks: the coordinator's
decomposition (and its repair request) and its synthesis, and the one conversation of
``runAgent``. Their events are the ones a task's runner yields (``user/message`` origin
``input``, ``turn/start``, ``llm/request``, ``assistant/message``, tool events, ``turn/end``),
recorded by ``RunJournaling`` under the agent's name and with no ``taskId``: a restore's fold
reads only task events, so they never change what a restore rebuilds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.journal import vocabulary as v
from oma_actors.orchestration.journaling import RunJournaling

if TYPE_CHECKING:
    from collections.abc import Callable

    from oma_actors.agents.context import ContextRewrite
    from oma_actors.agents.facts import Facts
    from oma_actors.domain.inflight import BoundaryKind, RunnerState
    from oma_actors.domain.messages import ChatOptions
    from oma_actors.domain.results import AgentRunResult
    from oma_actors.events import ProgressEvent
    from oma_actors.journal.options import JournalOptions

RUN_AGENT_MODE = "runAgent"


@dataclass(frozen=True, slots=True)
class ConversationJournal:
    """The loop hooks that record one agent's conversation outside the queue.

    Attributes:
        journaling: the run's journal.
        agent: the agent's name (``agentName`` of every event).
    """

    journaling: RunJournaling
    agent: str

    async def boundary(self, state: RunnerState, kind: BoundaryKind, facts: Facts) -> bool:
        """Record what the state gained; always ``True``: nothing here is checkpointed.

        The answer is the one the loop gets without any hook, so a journal changes no
        behaviour (an ``unsafe`` tool of ``run_agent`` runs as it does without a journal).
        """
        self.journaling.record(None, self.agent, facts)
        return True

    def request(
        self,
        state: RunnerState,
        options: ChatOptions,
        rewrite: ContextRewrite | None = None,
        opening: Facts = (),
    ) -> None:
        """Record ``turn/start`` and ``llm/request`` before a model call (and the prompt first).

        Raises:
            JournalLineageError: ``enforce_lineage`` refuses the request (the loop fails it).
        """
        self.journaling.request(None, self.agent, state, options, rewrite, opening)

    def close(self) -> None:
        """The conversation ended: close the turn a failed model call left open, then forget it.

        Each of the coordinator's conversations (decomposition, synthesis) starts afresh.
        """
        self.journaling.turn_failed(None)
        self.journaling.forget(None)


async def open_run_agent_journal(
    options: JournalOptions,
    *,
    run_id: str,
    agent: str,
    emit: Callable[[ProgressEvent], None],
) -> ConversationJournal:
    """Open the journal of a ``run_agent`` call and record its ``run/start`` (mode ``runAgent``).

    ``run_agent`` is never checkpointed, so no writer takes the events: they go straight to the
    journal, a durable one included.
    """
    journaling = await RunJournaling.open(options, run_id=run_id, attempt=1, emit=emit)
    journaling.recorder.stop_keeping()
    journaling.recorder.emit(v.run_started(mode=RUN_AGENT_MODE))
    return ConversationJournal(journaling, agent)


async def finish_run_agent_journal(journal: ConversationJournal, result: AgentRunResult) -> None:
    """Record ``run/end`` with the result's status and wait until the journal holds it all."""
    journal.close()
    status = result.status
    code = status.code if status is not None else ("ok" if result.success else "error")
    error = None
    if code != "ok":
        error = status.message if status is not None else result.output
    journal.journaling.end(code, error)
    await journal.journaling.recorder.flush()


def abort_run_agent_journal(journal: ConversationJournal, error: BaseException) -> None:
    """``run_agent`` raised (or was cancelled): record ``run/end`` (status ``aborted``) anyway."""
    journal.close()
    journal.journaling.abort(error)

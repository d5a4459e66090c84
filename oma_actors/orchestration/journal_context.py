"""Recording a context strategy's rewrite as ``context/replace`` (spec 17.2, JR-07).

The event names, by lineage, the events whose blocks left the conversation (``dropped``) and
the sources of every block the strategy made (``replacements``); the blocks it made are then
registered with the event's seq, so the next ``llm/request`` (and a snapshot's
``conversationLineage``) names it, and ``verify_run`` can reproduce them from it. ``detail``
carries the strategy's own facts (OMA's: ``droppedTurns``; a summary's model and usage) and the
``layout`` the fold needs to rebuild exactly the conversation the model saw
(``checkpoint.context_layout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oma_actors.domain.jsonforms import block_to_json
from oma_actors.journal import vocabulary as v
from oma_actors.journal.context_layout import layout_of
from oma_actors.journal.errors import JournalLineageError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from oma_actors.agents.context import ContextRewrite
    from oma_actors.domain.messages import ContentBlock
    from oma_actors.journal.recorder import JournalRecorder
    from oma_actors.orchestration.journal_tasks import TaskJournal


def check_rewrite_lineage(recorder: JournalRecorder, rewrite: ContextRewrite) -> None:
    """With ``enforce_lineage``, refuse a rewrite that kept a block without lineage (JR-09).

    Raises:
        JournalLineageError: naming the block, before anything is recorded.
    """
    if not recorder.enforce_lineage:
        return
    made = {id(r.block) for r in rewrite.replacements}
    for m, message in enumerate(rewrite.after):
        for b, block in enumerate(message.content):
            if id(block) not in made and recorder.lineage_for(block) is None:
                raise JournalLineageError(m, b, block.type)


def _lineage(recorder: JournalRecorder, blocks: Iterable[ContentBlock]) -> list[int]:
    seqs: set[int] = set()
    for block in blocks:
        seqs.update(recorder.lineage_for(block) or ())
    return sorted(seqs)


def record_rewrite(
    recorder: JournalRecorder,
    task: TaskJournal,
    rewrite: ContextRewrite,
    scope: dict[str, Any],
) -> None:
    """Emit the rewrite's ``context/replace`` and move the task's record to its conversation."""
    derived = [r.block for r in rewrite.replacements]
    dropped = rewrite.dropped()
    detail = dict(rewrite.detail)
    detail["layout"] = layout_of(rewrite.before, rewrite.after, derived)
    event = recorder.emit(
        v.context_replaced(
            strategy=rewrite.strategy,
            replacements=[
                {"sourceEventSeqs": _lineage(recorder, r.sources), "block": block_to_json(r.block)}
                for r in rewrite.replacements
            ],
            dropped=_lineage(recorder, dropped) if dropped else None,
            detail=detail,
            **scope,
        )
    )
    recorder.register_blocks(derived, [event.seq])
    task.lineage = [
        tuple(_row(recorder.lineage_for(block)) for block in message.content)
        for message in rewrite.after
    ]
    task.last_seq = event.seq


def _row(seqs: list[int] | None) -> tuple[int, ...] | None:
    return None if seqs is None else tuple(seqs)

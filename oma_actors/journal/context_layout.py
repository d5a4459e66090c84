"""Where each block of a rewritten conversation came from: the ``layout`` of ``context/replace``.

OMA's ``context/replace`` says which events a strategy dropped and which blocks it derived, but
not where the derived blocks went or in which order the survivors stand, so OMA's fold skips it
(JR-14) and a restore from an older snapshot plus its tail rebuilds a conversation the model
never saw. We record that order in ``detail.layout``, a member OMA ignores, as a list of entries
that together give the new conversation in order:

- ``{"keep": [a, b]}``: messages ``a`` to ``b`` (inclusive) of the conversation before the
  rewrite, unchanged;
- ``{"role": ..., "blocks": [...]}``: one message, where a block is ``[m, b]`` (the block at
  message ``m``, index ``b`` of the conversation before) or ``k`` (the ``k``-th replacement);
  ``"blocks": []`` is an empty message (one the conversation held, which no block can place).

A run of unchanged messages is one entry, so a rewrite that touches a few blocks of a long
conversation (``CompressToolResults``) records O(what changed), not O(conversation), and a
journal stays linear in the run. ``apply_layout`` is the inverse: the fold rebuilds exactly the
context the model saw, with each block's lineage.

No I/O; both directions live here so the writer and the fold can never disagree on the format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oma_actors.domain.messages import Message

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.messages import ContentBlock

Json = dict[str, Any]
Lineage = tuple[tuple[int, ...] | None, ...]


def layout_of(
    before: Sequence[Message], after: Sequence[Message], derived: Sequence[ContentBlock]
) -> list[Json]:
    """The layout of ``after``: every block is a block of ``before`` or one of ``derived``.

    Blocks are matched by identity (a strategy passes the blocks it keeps through unchanged).

    Raises:
        ValueError: a block of ``after`` is neither (the rewrite did not say where it came from).
    """
    at = {id(block): [m, b] for m, msg in enumerate(before) for b, block in enumerate(msg.content)}
    made = {id(block): k for k, block in enumerate(derived)}
    out: list[Json] = []
    for m, message in enumerate(after):
        refs: list[Any] = []
        for b, block in enumerate(message.content):
            ref = made.get(id(block), at.get(id(block)))
            if ref is None:
                raise ValueError(
                    f"block {b} of message {m} ({block.type}) is neither a block of the "
                    "conversation before the rewrite nor one of its replacements"
                )
            refs.append(ref)
        kept = _whole(before, message, refs)
        last = out[-1].get("keep") if out else None
        if kept is not None and last is not None and last[1] + 1 == kept:
            last[1] = kept  # extends the run of unchanged messages
        elif kept is not None:
            out.append({"keep": [kept, kept]})
        else:
            out.append({"role": message.role, "blocks": refs})
    return out


def _whole(before: Sequence[Message], message: Message, refs: list[Any]) -> int | None:
    """The index of the message of ``before`` that ``message`` repeats unchanged, if any."""
    first = refs[0] if refs else None
    if not isinstance(first, list):
        return None
    source = before[first[0]]
    if source.role != message.role or len(source.content) != len(refs):
        return None
    if all(ref == [first[0], b] for b, ref in enumerate(refs)):
        return int(first[0])
    return None


def apply_layout(
    conversation: Sequence[Message],
    lineage: Sequence[tuple[tuple[int, ...] | None, ...]] | None,
    layout: Any,
    derived: Sequence[ContentBlock],
    seq: int,
) -> tuple[tuple[Message, ...], tuple[Lineage, ...] | None]:
    """The conversation (and its lineage) a ``context/replace`` at ``seq`` produced.

    A kept block keeps its lineage; a derived block's lineage is the event itself (JR-07).

    Raises:
        ValueError: the layout is malformed or points outside the conversation or replacements.
    """
    if not isinstance(layout, list) or not layout:
        raise ValueError(f"layout must be a non-empty list, got {layout!r}")
    messages: list[Message] = []
    rows: list[Lineage] = []
    for entry in layout:
        if isinstance(entry, dict) and "keep" in entry:
            first, last = _range(entry["keep"], len(conversation))
            messages += conversation[first : last + 1]
            rows += [lineage[m] if lineage is not None else () for m in range(first, last + 1)]
            continue
        role = entry.get("role") if isinstance(entry, dict) else None
        refs = entry.get("blocks") if isinstance(entry, dict) else None
        # No block: an empty message the conversation held (a model that answered with none),
        # which ``layout_of`` can only write this way; refusing it would discard the tail.
        if role not in ("user", "assistant") or not isinstance(refs, list):
            raise ValueError(f"layout entry {entry!r} needs a role and a blocks list")
        blocks: list[ContentBlock] = []
        row: list[tuple[int, ...] | None] = []
        for ref in refs:
            block, source = _resolve(ref, conversation, lineage, derived, seq)
            blocks.append(block)
            row.append(source)
        messages.append(Message(role, blocks))
        rows.append(tuple(row))
    return tuple(messages), (tuple(rows) if lineage is not None else None)


def _range(keep: Any, size: int) -> tuple[int, int]:
    if (
        isinstance(keep, list)
        and len(keep) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) for i in keep)
        and 0 <= keep[0] <= keep[1] < size
    ):
        return keep[0], keep[1]
    raise ValueError(f"layout keeps messages {keep!r}; the conversation has {size}")


def _resolve(
    ref: Any,
    conversation: Sequence[Message],
    lineage: Sequence[tuple[tuple[int, ...] | None, ...]] | None,
    derived: Sequence[ContentBlock],
    seq: int,
) -> tuple[ContentBlock, tuple[int, ...] | None]:
    if isinstance(ref, int) and not isinstance(ref, bool):
        if not 0 <= ref < len(derived):
            raise ValueError(f"layout names replacement {ref}; there are {len(derived)}")
        return derived[ref], (seq,)
    if (
        isinstance(ref, list)
        and len(ref) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) for i in ref)
    ):
        m, b = ref
        if 0 <= m < len(conversation) and 0 <= b < len(conversation[m].content):
            source = lineage[m][b] if lineage is not None else None
            return conversation[m].content[b], source
    raise ValueError(f"layout names block {ref!r}, which the conversation does not have")

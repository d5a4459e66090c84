"""``context_layout`` both ways: every shape a rewrite can take comes back exactly, lineage too.

``layout_of`` (the writer) and ``apply_layout`` (the fold) must agree on every conversation a
strategy may send, ``CustomContext``'s included: messages dropped from the middle, reordered or
repeated, blocks of one message reordered, a message made of some blocks of another, and an
empty message the runner's conversation held. What a malformed layout names outside the
conversation or the replacements is a ``ValueError`` (the fold's JR-16 discard), never an
``IndexError`` or a silently different conversation.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from oma_actors.journal.context_layout import apply_layout, layout_of
from oma_actors.llm import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock

SEQ = 99


def before() -> tuple[Message, ...]:
    """A prompt, a tool turn with three calls, a text turn: seven blocks, five messages."""
    calls = [ToolUseBlock(f"c{i}", "t", {}) for i in range(3)]
    return (
        Message("user", [TextBlock("prompt")]),
        Message("assistant", list(calls)),
        Message("user", [ToolResultBlock(c.id, f"r{c.id}") for c in calls]),
        Message("assistant", [TextBlock("answer")]),
        Message("user", [TextBlock("again")]),
    )


def lineage_of(messages: Sequence[Message]) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """A distinct lineage per block: (10 * message + block,)."""
    return tuple(
        tuple((10 * m + b,) for b in range(len(message.content)))
        for m, message in enumerate(messages)
    )


def round_trip(
    old: tuple[Message, ...], new: tuple[Message, ...], derived: Sequence[ContentBlock] = ()
) -> None:
    """``new`` and each block's lineage come back from the layout (derived: the event's seq)."""
    lineage = lineage_of(old)
    where = {id(b): lineage[m][i] for m, msg in enumerate(old) for i, b in enumerate(msg.content)}
    made = {id(b) for b in derived}
    layout = layout_of(old, new, derived)
    rebuilt, rows = apply_layout(old, lineage, layout, derived, SEQ)
    assert rebuilt == new
    assert all(
        a is b
        for x, y in zip(rebuilt, new, strict=True)
        for a, b in zip(x.content, y.content, strict=True)
    )
    expected = tuple(
        tuple((SEQ,) if id(b) in made else where[id(b)] for b in message.content) for message in new
    )
    assert rows == expected


def test_messages_dropped_from_the_middle_are_not_kept() -> None:
    old = before()
    round_trip(old, (old[0], old[3], old[4]))


@pytest.mark.parametrize("order", [(0, 3, 4, 1, 2), (0, 1, 2, 0), (0, 0, 3, 4)])
def test_messages_reordered_or_repeated_come_back_in_their_order(order: tuple[int, ...]) -> None:
    old = before()
    round_trip(old, tuple(old[i] for i in order))


@pytest.mark.parametrize("picks", [(0, 2, 1), (2, 1, 0), (0, 0, 2), (1,)])
def test_blocks_of_one_message_in_another_order_are_no_keep(picks: tuple[int, ...]) -> None:
    old = before()
    calls = old[1].content
    round_trip(old, (old[0], Message("assistant", [calls[i] for i in picks]), old[2]))


def test_a_block_taken_from_a_message_keeps_its_own_lineage() -> None:
    old = before()
    results = old[2].content
    note = TextBlock("note")
    round_trip(old, (old[0], old[1], Message("user", [results[2], results[1], note])), [note])


def test_an_empty_message_the_conversation_held_comes_back() -> None:
    # A model that answered with no block leaves an empty assistant message; a strategy that
    # keeps it (``CustomContext`` passing it through) must be restorable, not discarded.
    old = (
        Message("user", [TextBlock("prompt")]),
        Message("assistant", []),
        Message("user", [TextBlock("again")]),
    )
    note = TextBlock("note")
    round_trip(old, (Message("user", [*old[0].content, note]), Message("assistant", []), old[2]),
               [note])  # fmt: skip


@pytest.mark.parametrize(
    "layout",
    [
        [{"keep": [0, 5]}],  # past the end: five messages, 0..4
        [{"keep": [-1, 0]}],
        [{"keep": [0]}],
        [{"keep": [0, 1, 2]}],
        [{"keep": [False, True]}],
        [{"role": "user", "blocks": [-1]}],
        [{"role": "user", "blocks": [1]}],  # one replacement: 0 only
        [{"role": "user", "blocks": [False]}],
        [{"role": "user", "blocks": [[-1, 0]]}],
        [{"role": "user", "blocks": [[0, 1]]}],  # the prompt has one block
        [{"role": "user", "blocks": [[0, 0, 0]]}],
        [{"role": "user", "blocks": 5}],
    ],
)
@pytest.mark.parametrize("with_lineage", [False, True])
def test_a_layout_naming_what_is_not_there_is_refused(layout: object, with_lineage: bool) -> None:
    old = before()
    lineage = lineage_of(old) if with_lineage else None
    with pytest.raises(ValueError, match="layout"):
        apply_layout(old, lineage, layout, [TextBlock("made")], SEQ)

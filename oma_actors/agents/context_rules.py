"""The pure part of the context strategies: where a conversation may be cut, and the rewrites.

A conversation the runner sends starts with the prompt message and alternates: an assistant
message, then the user message that answers it (tool results, or a repair request). A *turn* is
such an assistant message with its answer: cutting between turns never separates a
``tool_use`` from its ``tool_result``, and the roles keep alternating after the prompt. Strategy
blocks (a truncation notice, a summary) go at the end of the prompt message, never in front of
``tool_result`` blocks (which providers require first in a message).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.agents.context import (
    CompressToolResults,
    ContextRewrite,
    ContextStrategyError,
    CustomContext,
    Replacement,
    SlidingWindow,
)
from oma_actors.domain.jsonforms import block_to_json
from oma_actors.domain.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.journal.jsjson import js_dumps

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

TRUNCATION_NOTICE = "[Earlier conversation history truncated: older turns were removed]"
SUMMARY_MARK = "[Conversation summary]"
SUMMARY_UNAVAILABLE = "[Conversation summary unavailable]"  # OMA's text for an empty summary
COMPRESSED_MARK = "[Tool output compressed"
CHARS_PER_TOKEN = 4  # OMA's estimateTokens: content characters / 4, rounded up
IMAGE_CHARS = 64  # OMA's flat cost of an image block, whatever its size


def estimate_tokens(conversation: Sequence[Message]) -> int:
    """OMA's ``estimateTokens``: the content characters of every block / 4, rounded up.

    Only what the model reads counts, in JavaScript's ``.length`` (UTF-16 code units): the text
    of a text or reasoning block, a tool result's ``tool_result_content_size``, the JSON of a
    tool call's input, and a flat ``IMAGE_CHARS`` per image (its base64 would otherwise keep a
    conversation with one image above any threshold, so ``Summarize`` would run every call).
    """
    chars = sum(_block_chars(b) for m in conversation for b in m.content)
    return -(-chars // CHARS_PER_TOKEN)


def js_length(text: str) -> int:
    """JavaScript's ``text.length``: UTF-16 code units, so a character past U+FFFF counts 2."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def tool_result_content_size(content: str | Sequence[ContentBlock]) -> int:
    """OMA's ``toolResultContentSize``: the characters a tool result's content carries.

    Text counts its length; an image its ``data`` (or ``url``) and media type plus 32. A block
    OMA's tool results cannot hold (ours may) counts as it would in a message.
    """
    if isinstance(content, str):
        return js_length(content)
    total = 0
    for part in content:
        if isinstance(part, ImageBlock):
            source = part.url if part.url is not None else (part.data or "")
            total += js_length(source) + js_length(part.media_type) + 32
        else:
            total += _block_chars(part)
    return total


def _block_chars(block: ContentBlock) -> int:
    if isinstance(block, TextBlock | ReasoningBlock):
        return js_length(block.text)
    if isinstance(block, ToolResultBlock):
        return tool_result_content_size(block.content)
    if isinstance(block, ToolUseBlock):
        return js_length(js_dumps(block.input))
    return IMAGE_CHARS


def turns_after_prompt(conversation: Sequence[Message]) -> list[list[Message]]:
    """The messages after the prompt grouped into turns (an assistant message and its answer).

    A user message that does not follow an assistant message is a turn of its own.
    """
    turns: list[list[Message]] = []
    for message in conversation[1:]:
        if message.role == "user" and turns and turns[-1][-1].role == "assistant":
            turns[-1].append(message)
        else:
            turns.append([message])
    return turns


def strategy_block(prompt: Message) -> TextBlock | None:
    """The notice or summary a strategy put at the end of the prompt message, if any."""
    last = prompt.content[-1] if prompt.content else None
    if not isinstance(last, TextBlock):
        return None
    # OMA's empty-summary text does not start with the mark: it is told apart whole.
    if last.text.startswith((TRUNCATION_NOTICE, SUMMARY_MARK)) or last.text == SUMMARY_UNAVAILABLE:
        return last
    return None


def prompt_with(prompt: Message, block: TextBlock) -> Message:
    """The prompt message with ``block`` in place of any earlier strategy block."""
    own = strategy_block(prompt)
    kept = [b for b in prompt.content if b is not own]
    return Message(prompt.role, [*kept, block])


def sliding_window(
    conversation: tuple[Message, ...], strategy: SlidingWindow
) -> ContextRewrite | None:
    """Keep the prompt and the last ``max_turns`` turns; ``None`` while they all fit."""
    turns = turns_after_prompt(conversation)
    if len(turns) <= strategy.max_turns:
        return None
    gone = turns[: len(turns) - strategy.max_turns]
    kept = [m for turn in turns[len(gone) :] for m in turn]
    prompt = conversation[0]
    replacements: tuple[Replacement, ...] = ()
    if strategy_block(prompt) is None:
        notice = TextBlock(TRUNCATION_NOTICE)
        sources = tuple(b for turn in gone for m in turn for b in m.content)
        replacements = (Replacement(notice, sources),)
        prompt = prompt_with(prompt, notice)
    after = (prompt, *kept)
    return ContextRewrite(
        strategy=strategy.kind,
        before=conversation,
        after=after,
        replacements=replacements,
        detail={"droppedTurns": len(gone)},
    )


def summary_split(
    conversation: tuple[Message, ...],
) -> tuple[list[Message], list[Message]] | None:
    """The (older, recent) messages a summary replaces and keeps: the older half of the turns.

    ``None`` when there are fewer than two turns (nothing can be summarized and still leave the
    model the turn it is answering).
    """
    turns = turns_after_prompt(conversation)
    if len(turns) < 2:
        return None
    cut = len(turns) // 2
    return [m for t in turns[:cut] for m in t], [m for t in turns[cut:] for m in t]


def summary_input(older: Sequence[Message], previous: TextBlock | None) -> str:
    """The conversation text the summarizer is asked to condense (media as placeholders)."""
    lines = [previous.text] if previous is not None else []
    for message in older:
        blocks = [block_to_json(_without_media(b)) for b in message.content]
        lines.append(js_dumps({"role": message.role, "content": blocks}))
    return "\n".join(lines)


def _without_media(block: ContentBlock) -> ContentBlock:
    # A base64 image would make the summary request larger than what it summarizes.
    if isinstance(block, ImageBlock):
        return TextBlock(f"[image: {block.media_type}]")
    if isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
        return replace(block, content=[_without_media(b) for b in block.content])
    return block


def _marker(block: ContentBlock, max_chars: int) -> ToolResultBlock | None:
    """The marker standing for ``block``, or ``None`` if it is kept (OMA's rules and marker).

    The threshold is ours: longer than ``max_chars`` (OMA: at least ``minChars``).
    """
    if not isinstance(block, ToolResultBlock) or block.is_error:
        return None
    if isinstance(block.content, str) and block.content.startswith(COMPRESSED_MARK):
        return None  # compressed already: a second marker would count the marker's size
    size = tool_result_content_size(block.content)
    if size <= max_chars:
        return None
    unit = "chars" if isinstance(block.content, str) else "estimated chars"
    return ToolResultBlock(
        block.tool_use_id, f"{COMPRESSED_MARK} — {size} {unit}, already processed]"
    )


def compress_tool_results(
    conversation: tuple[Message, ...], strategy: CompressToolResults
) -> ContextRewrite | None:
    """Replace long, answered, non-error tool results by a marker; ``None`` when none is."""
    answered = [i for i, m in enumerate(conversation) if _results(m)]
    if len(answered) < 2:
        return None  # the latest results are what the model is about to read
    replacements: list[Replacement] = []
    after = list(conversation)
    for index in answered[:-1]:
        message = conversation[index]
        content: list[ContentBlock] = []
        for block in message.content:
            marker = _marker(block, strategy.max_chars)
            if marker is not None:
                replacements.append(Replacement(marker, (block,)))
            content.append(block if marker is None else marker)
        if any(a is not b for a, b in zip(content, message.content, strict=True)):
            after[index] = Message(message.role, content)
    if not replacements:
        return None
    return ContextRewrite(
        strategy=strategy.kind,
        before=conversation,
        after=tuple(after),
        replacements=tuple(replacements),
    )


def _results(message: Message) -> bool:
    return message.role == "user" and any(isinstance(b, ToolResultBlock) for b in message.content)


def custom(conversation: tuple[Message, ...], strategy: CustomContext) -> ContextRewrite | None:
    """Apply a custom function; a block it made is recorded with the whole input as sources.

    Raises:
        ContextStrategyError: ``fn`` did not return a non-empty list of ``Message``, or one of
            them has no content list, no block, or a value that is not a content block; or
            ``fn`` changed a block it was given in place.
    """
    # Each message is a copy, so a function that edits a content list in place cannot change the
    # state's conversation (the one the checkpoint and the journal hold); blocks are shared, so
    # those it passes through keep their lineage. A block's own mutable parts are shared too:
    # their state is taken before and compared after (``_refuse_changed_in_place``).
    held = _mutable_parts(conversation)
    out = strategy.fn([Message(m.role, list(m.content)) for m in conversation])
    _refuse_changed_in_place(held)
    if not isinstance(out, list) or not out or not all(isinstance(m, Message) for m in out):
        raise ContextStrategyError(
            f"CustomContext.fn must return a non-empty list of Message, got {out!r}"
        )
    after = tuple(out)
    given = {id(b): b for m in conversation for b in m.content}
    passed = {(m.role, _block_ids(m)) for m in conversation}
    for index, message in enumerate(after):
        _check_custom_message(index, message, given, passed)
    if len(after) == len(conversation) and all(
        a.role == b.role and _same_blocks(a, b) for a, b in zip(after, conversation, strict=True)
    ):
        return None
    sources = tuple(given.values())
    made: list[Replacement] = []
    for message in after:
        made += [Replacement(b, sources) for b in message.content if id(b) not in given]
    return ContextRewrite(
        strategy=strategy.kind, before=conversation, after=after, replacements=tuple(made)
    )


_Held = tuple[int, int, ToolUseBlock | ToolResultBlock, object]


def _mutable_parts(conversation: Sequence[Message]) -> list[_Held]:
    """(message, block, the block, its state) for each block with parts ``fn`` could change.

    Blocks are frozen, but a tool call's ``input`` dict and a tool result's content list are
    not: a function that edits one changes the running conversation while the journal, which
    records a passed-through block as a reference to the one before, and so a restore, keep the
    old value. Only those parts are looked at, so an image's base64 is never serialized here.
    """
    return [
        (m, b, block, state)
        for m, message in enumerate(conversation)
        for b, block in enumerate(message.content)
        if isinstance(block, ToolUseBlock | ToolResultBlock)
        and (state := _state(block)) is not None
    ]


def _state(block: object) -> object:
    """What can change in ``block`` without replacing it, comparable by ``==``; ``None``: nothing.

    A content list's items are held (not their ids, which a freed block's successor may reuse)
    and compared by value; an input by its JSON text, which keeps key order and number layout.
    """
    if isinstance(block, ToolUseBlock):
        try:
            return js_dumps(block.input)
        except (TypeError, ValueError):  # not JSON: still compared, by its text
            return repr(block.input)
    if isinstance(block, ToolResultBlock) and isinstance(block.content, list):
        return tuple((item, _state(item)) for item in block.content)
    return None


def _refuse_changed_in_place(held: Sequence[_Held]) -> None:
    """Refuse a ``fn`` that changed a block it was given instead of returning a new one.

    Raises:
        ContextStrategyError: naming the first block changed.
    """
    for m, b, block, state in held:
        if _state(block) != state:
            name = block.id if isinstance(block, ToolUseBlock) else block.tool_use_id
            raise ContextStrategyError(
                f"CustomContext.fn changed block {b} of message {m} ({block.type} {name}) in "
                "place: a block given to fn must not be edited, return a new block instead"
            )


def _block_ids(message: Message) -> tuple[int, ...]:
    return tuple(id(block) for block in message.content)


def _check_custom_message(
    index: int,
    message: Message,
    given: Mapping[int, ContentBlock],
    passed: Collection[tuple[str, tuple[int, ...]]],
) -> None:
    """Refuse a message or block ``fn`` made that could be neither sent nor checkpointed.

    The snapshot and the journal hold exactly what the model was sent: a value that is not a
    content block (a provider-shaped dict, say) has no JSON form a restore can read back, and a
    message without blocks is one providers refuse. Either fails the task here, before anything
    records it. What ``fn`` passed through (``given`` blocks, ``passed`` messages: same role,
    same blocks) is the runner's own and is not judged here.
    """
    if not isinstance(message.content, list):
        raise ContextStrategyError(
            f"CustomContext.fn returned message {index} without a content list: {message!r}"
        )
    if (message.role, _block_ids(message)) in passed:
        return
    if not message.content:
        raise ContextStrategyError(
            f"CustomContext.fn returned message {index} ({message.role}) with no content block"
        )
    for position, block in enumerate(message.content):
        foreign = None if id(block) in given else _foreign_block(block)
        if foreign is not None:
            raise ContextStrategyError(
                f"CustomContext.fn returned message {index} with a {type(foreign).__name__} "
                f"in block {position}: content blocks are TextBlock, ImageBlock, ReasoningBlock, "
                "ToolUseBlock or ToolResultBlock"
            )


def _foreign_block(block: object) -> object | None:
    """``block``, or the value nested in its tool result, that is not a content block."""
    if not isinstance(block, ContentBlock):
        return block
    if isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
        if not isinstance(block.content, list):
            return block.content
        for inner in block.content:
            foreign = _foreign_block(inner)
            if foreign is not None:
                return foreign
    return None


def _same_blocks(a: Message, b: Message) -> bool:
    return len(a.content) == len(b.content) and all(
        x is y for x, y in zip(a.content, b.content, strict=True)
    )


def check_sendable(conversation: Sequence[Message]) -> None:
    """Refuse a conversation a provider would reject: a split tool pair, an assistant last.

    Raises:
        ContextStrategyError: naming the message at fault.
    """
    if not conversation or conversation[-1].role != "user":
        raise ContextStrategyError("a rewritten conversation must end with a user message")
    for index, message in enumerate(conversation):
        calls = {b.id for b in message.content if isinstance(b, ToolUseBlock)}
        answers = {b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock)}
        if message.role == "assistant" and calls:
            following = conversation[index + 1] if index + 1 < len(conversation) else None
            got = (
                {b.tool_use_id for b in following.content if isinstance(b, ToolResultBlock)}
                if following is not None and following.role == "user"
                else set()
            )
            if got != calls:
                raise ContextStrategyError(
                    f"message {index} calls tools {sorted(calls)} but the next message answers "
                    f"{sorted(got)}: a tool_use must keep its tool_result"
                )
        if answers:
            previous = conversation[index - 1] if index > 0 else None
            asked = (
                {b.id for b in previous.content if isinstance(b, ToolUseBlock)}
                if previous is not None and previous.role == "assistant"
                else set()
            )
            if not answers <= asked:
                raise ContextStrategyError(
                    f"message {index} answers tool calls {sorted(answers - asked)} that the "
                    "message before it does not make: a tool_result must follow its tool_use"
                )

"""One encode pass per save (#25): the snapshot text carries its JSON string literal, built from
message texts escaped once per run, and the FileStore writes the bytes one ``json.dumps`` of its
document would."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st
from test_checkpoint_codec_cache import snapshot_with

from oma_actors.checkpoint.codec import encode
from oma_actors.checkpoint.fragments import EncodeCache
from oma_actors.domain.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.domain.results import ToolCallRecord
from oma_actors.stores.base import JsonText, MemoryEntry
from oma_actors.stores.file_format import encode_store

# Every character class the JSON escape treats apart: quotes, backslashes, controls, NUL, the
# line separators JSON.stringify keeps raw, non-BMP, and text that looks like a placeholder.
_TRICKY = [
    'say "hi"',
    "back\\slash \\u0000",
    "tab\tnew\nline\r\x00\x1f\x7f",
    "\u2028\u2029 ü 😀",
    '"\\u0000deadbeef:0\\u0000"',
    '\\"\\\\u0000',
]


def _entry(value: str) -> MemoryEntry:
    return MemoryEntry(
        key='run/"k"',
        value=value,
        metadata={"namespace": "checkpoint", "n": 1},
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        expires_at_turn=3,
    )


def test_the_literal_of_each_save_equals_json_dumps_of_its_text() -> None:
    cache = EncodeCache()
    conversation: tuple[Message, ...] = (Message("user", [TextBlock(_TRICKY[0])]),)
    records: tuple[ToolCallRecord, ...] = ()
    for turn, text in enumerate(_TRICKY):
        call = ToolUseBlock(f"c{turn}", "echo", {"s": text})
        conversation += (
            Message("assistant", [call]),
            Message("user", [ToolResultBlock(f"c{turn}", text)]),
        )
        records += (
            ToolCallRecord(tool_name="echo", input={"s": text}, output=text, duration_ms=0),
        )
        encoded = encode(snapshot_with(conversation, records), cache)
        assert isinstance(encoded, JsonText)
        # Fresh parts and parts whose escape an earlier save already made, spliced together.
        assert encoded.json_literal() == json.dumps(str(encoded), ensure_ascii=False)


def test_a_file_store_writes_the_same_bytes_for_a_literal_and_for_a_plain_string() -> None:
    conversation = (Message("user", [TextBlock(t)]) for t in _TRICKY)
    encoded = encode(snapshot_with(tuple(conversation), ()), EncodeCache())
    plain = str(encoded)
    assert type(plain) is str
    with_literal = encode_store([_entry(encoded), _entry("x")])
    assert with_literal == encode_store([_entry(plain), _entry("x")])
    document = {
        "version": 1,
        "entries": [
            {
                "key": 'run/"k"',
                "value": value,
                "metadata": {"namespace": "checkpoint", "n": 1},
                "createdAt": "2026-01-01T00:00:00.000Z",
                "expiresAtTurn": 3,
            }
            for value in (plain, "x")
        ],
    }
    assert with_literal == json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


class _Wrong(JsonText):
    """A value whose literal is not its text's: the store must write the literal it is given."""

    def json_literal(self) -> str:
        return '"other"'


def test_the_store_takes_the_literal_from_the_value() -> None:
    # What makes the pass single: the FileStore does not escape a JsonText itself.
    assert b'"value":"other"' in encode_store([_entry(_Wrong("text"))])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=6))
def test_any_text_spliced_from_cached_escapes_equals_one_escape(texts: list[str]) -> None:
    cache = EncodeCache()
    conversation: tuple[Message, ...] = ()
    for text in texts:
        conversation += (Message("user", [TextBlock(text)]),)
        encoded = encode(snapshot_with(conversation, ()), cache)
        assert encoded.json_literal() == json.dumps(str(encoded), ensure_ascii=False)


def test_a_rewritten_list_is_escaped_again_not_spliced_from_its_old_escape() -> None:
    # A context strategy rewrites the conversation: same first message, other ones after it.
    cache = EncodeCache()
    first = Message("user", [TextBlock('first "one"')])
    for conversation in (
        (first, Message("assistant", [TextBlock("a\\b")]), Message("user", [TextBlock("c")])),
        (first, Message("assistant", [TextBlock('summary "s"')])),
        (first, Message("assistant", [TextBlock("other")]), Message("user", [TextBlock("x")])),
        (first,),
        (first, Message("assistant", [TextBlock("d\n")])),
    ):
        encoded = encode(snapshot_with(conversation, ()), cache)
        assert encoded.json_literal() == json.dumps(str(encoded), ensure_ascii=False)

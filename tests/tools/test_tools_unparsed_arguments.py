"""Tool calls whose arguments were not valid JSON: an error result, and the tool never runs.

An adapter keeps such arguments' text under one marker key. Pydantic ignores an unknown key, so
before the tool layer looked for the marker, a tool whose input fields all have defaults ran on
those defaults (an unsafe tool too) whatever the model had meant to send.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from oma_actors import ToolContext, define_tool
from oma_actors.domain.messages import UNPARSED_ARGUMENTS
from oma_actors.errors import ToolInputError
from oma_actors.llm import ToolUseBlock
from oma_actors.llm.sdk import unparsed_arguments
from oma_actors.tools import execute_tool_call
from oma_actors.tools.validation import parse_tool_input


class Mail(BaseModel):
    to: str = "everyone@example.com"
    body: str = ""


SENT: list[Mail] = []


async def send(args: BaseModel, ctx: ToolContext) -> str:
    assert isinstance(args, Mail)
    SENT.append(args)
    return "sent"


SEND = define_tool(
    name="send_mail", description="send mail", input_model=Mail, execute=send, effect="unsafe"
)
CTX = ToolContext(run_id="r", task_id="t", tool_call_id="c1", agent_name="w")
CUT_OFF = '{"to": "boss@example.com", "body": "draft: do not'


@pytest.fixture(autouse=True)
def nothing_sent() -> None:
    SENT.clear()


@pytest.mark.parametrize(
    "input_",
    [
        unparsed_arguments(CUT_OFF),
        # the Anthropic adapter's key before both adapters shared one: a restored run may hold it
        {"_raw_input": CUT_OFF},
    ],
    ids=["marker", "legacy-anthropic-key"],
)
async def test_unparsed_arguments_are_an_error_result_and_the_tool_does_not_run(
    input_: dict[str, object],
) -> None:
    outcome = await execute_tool_call(
        ToolUseBlock("c1", "send_mail", input_), {"send_mail": SEND}, CTX
    )

    assert SENT == []
    assert outcome.block.is_error
    assert outcome.block.content == (
        "Error: the arguments for tool 'send_mail' were not valid JSON (a JSON object is "
        f"required), so it did not run; they read: {CUT_OFF}"
    )
    assert outcome.record.is_error
    assert outcome.record.input == input_


def test_a_non_text_value_is_quoted_as_json() -> None:
    with pytest.raises(ToolInputError, match=r"they read: \[1, 2\]$"):
        parse_tool_input(Mail, "send_mail", unparsed_arguments([1, 2]))


def test_long_unparsed_arguments_are_quoted_only_in_part() -> None:
    text = '{"body": "' + "x" * 5000

    with pytest.raises(ToolInputError) as caught:
        parse_tool_input(Mail, "send_mail", unparsed_arguments(text))

    message = str(caught.value)
    assert message.endswith(f"they read: {text[:200]}... ({len(text) - 200} more characters)")
    assert len(message) < 400


def test_the_adapters_marker_is_the_one_the_tool_layer_refuses() -> None:
    with pytest.raises(ToolInputError, match="not valid JSON"):
        parse_tool_input(Mail, "send_mail", unparsed_arguments("{"))
    assert list(unparsed_arguments("{")) == [UNPARSED_ARGUMENTS]


async def test_an_unsafe_call_that_cannot_run_is_never_recorded_as_dispatched() -> None:
    """No ``tool_dispatch`` save for a call the tool layer refuses: a crash after such a save
    would leave the call "outcome unknown" on restore, though it never ran."""
    from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
    from oma_actors.events import CheckpointSaved, ProgressEvent
    from oma_actors.llm import LLMResponse, TextBlock
    from oma_actors.stores import InMemoryStore
    from oma_actors.testing import ScriptedAdapter

    cut = LLMResponse(
        [ToolUseBlock("c1", "send_mail", unparsed_arguments('{"to": "boss'))],
        stop_reason="max_tokens",
        usage=TokenUsage(1, 1),
    )
    adapter = ScriptedAdapter([cut, LLMResponse([TextBlock("gave up")], usage=TokenUsage(1, 1))])
    team = Team("t", [AgentConfig("w", adapter=adapter, tools=[SEND])])
    saved: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=saved.append).run_tasks(
        team, [Task("a", "x", assignee="w")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r"),
    )  # fmt: skip
    assert result.success
    boundaries = [e.boundary for e in saved if isinstance(e, CheckpointSaved)]
    assert "tool_commit" in boundaries  # the error result was committed
    assert "tool_dispatch" not in boundaries
    assert SENT == []

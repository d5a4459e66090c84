"""Tool arguments that are not a JSON object, from the provider's reply to the model's next request.

Both adapters keep such arguments under the one marker key; the tool layer answers the call
with an error result the model sees. The tool never runs (not on its input model's defaults),
and an ``on_tool_call`` gate is never asked to approve a call that cannot run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from anthropic_replies import HELLO as A_HELLO
from anthropic_replies import OPTIONS as A_OPTIONS
from anthropic_replies import adapter_for as anthropic_adapter_for
from anthropic_replies import reply_body
from openai_replies import completion, tool_call
from pydantic import BaseModel

from oma_actors import AgentConfig, OpenMultiAgent, ToolContext, define_tool
from oma_actors.domain.messages import UNPARSED_ARGUMENTS, ToolUseBlock

if TYPE_CHECKING:
    from fake_server import FakeServer

    from oma_actors.approvals.gates import ToolCallRequest

CUT_OFF = '{"to": "boss@example.com", "body": "draft: do not'


class Mail(BaseModel):
    to: str = "everyone@example.com"
    body: str = ""


@pytest.mark.parametrize(
    ("input_", "text"), [(CUT_OFF, CUT_OFF), (["a@b.c"], '["a@b.c"]'), (None, "null")]
)
async def test_anthropic_input_that_is_not_an_object_is_kept_under_the_marker(
    fake_server: FakeServer, input_: Any, text: str
) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "send_mail", "input": input_}
    fake_server.reply(200, reply_body([use], stop_reason="max_tokens"))

    async with anthropic_adapter_for(fake_server) as adapter:
        response = await adapter.chat(A_HELLO, A_OPTIONS)

    assert response.tool_uses == [ToolUseBlock("toolu_1", "send_mail", {UNPARSED_ARGUMENTS: text})]


def _openai_script(fake_server: FakeServer) -> None:
    calls = [tool_call("call_1", "send_mail", CUT_OFF)]
    fake_server.reply(
        200, completion({"content": None, "tool_calls": calls}, finish_reason="length")
    )
    fake_server.reply(200, completion({"content": "sorry, retrying later"}))


def _anthropic_script(fake_server: FakeServer) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "send_mail", "input": CUT_OFF}
    fake_server.reply(200, reply_body([use], stop_reason="max_tokens"))
    fake_server.reply(200, reply_body([{"type": "text", "text": "sorry, retrying later"}]))


def _openai_tool_result(body: dict[str, Any]) -> str:
    (tool_message,) = [m for m in body["messages"] if m["role"] == "tool"]
    return str(tool_message["content"])


def _anthropic_tool_result(body: dict[str, Any]) -> str:
    (result,) = body["messages"][-1]["content"]
    assert result["is_error"] is True
    return str(result["content"])


@pytest.mark.parametrize(
    ("provider", "path", "script", "tool_result"),
    [
        ("openai", "/v1", _openai_script, _openai_tool_result),
        ("anthropic", "", _anthropic_script, _anthropic_tool_result),
    ],
)
async def test_an_unsafe_tool_with_defaults_does_not_run_on_unparsed_arguments(
    fake_server: FakeServer,
    provider: str,
    path: str,
    script: Any,
    tool_result: Any,
) -> None:
    script(fake_server)
    sent: list[Mail] = []
    asked: list[ToolCallRequest] = []

    async def send(args: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(args, Mail)
        sent.append(args)
        return "sent"

    def gate(call: ToolCallRequest) -> bool:
        asked.append(call)
        return True

    tool = define_tool(
        name="send_mail", description="send mail", input_model=Mail, execute=send, effect="unsafe"
    )
    agent = AgentConfig(
        "mailer",
        model="m",
        provider=provider,
        base_url=f"{fake_server.url}{path}",
        api_key="test-key",
        tools=[tool],
    )

    result = await OpenMultiAgent(on_tool_call=gate).run_agent(agent, "mail the boss")

    assert sent == []
    assert asked == []
    assert result.output == "sorry, retrying later"
    (record,) = result.tool_calls
    assert record.is_error
    seen = tool_result(fake_server.requests[1].body)
    assert seen == record.output
    assert seen.startswith("Error: the arguments for tool 'send_mail' were not valid JSON")
    assert seen.endswith(f"they read: {CUT_OFF}")

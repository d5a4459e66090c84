"""What the provider adapters refuse, and how they type what a provider gets wrong.

Each case guards a check that no other test reached: a bad adapter argument taken silently, a
block the provider cannot take sent anyway (the provider's 400 then names nothing of ours), a
response without a tool call's name or id passed to the tool layer, an error typed as the
wrong kind (a credentials problem retried as a provider error).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anthropic
import pytest
from anthropic_replies import HELLO as A_HELLO
from anthropic_replies import OPTIONS as A_OPTIONS
from anthropic_replies import adapter_for as anthropic_adapter_for
from anthropic_replies import reply_body
from openai_replies import HELLO as O_HELLO
from openai_replies import OPTIONS as O_OPTIONS
from openai_replies import TEXT_REPLY as O_TEXT_REPLY
from openai_replies import adapter_for as openai_adapter_for
from openai_replies import completion

from oma_actors.domain.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.errors import (
    AuthenticationError,
    ConfigurationError,
    ProviderError,
)
from oma_actors.llm import AnthropicAdapter, OpenAIAdapter

if TYPE_CHECKING:
    from fake_server import FakeServer


@pytest.mark.parametrize(
    "arguments",
    [
        {"max_retries": -1},
        {"retry_base_delay": -0.1},
        {"timeout": 0},
        {"default_max_tokens": 0},
    ],
)
def test_the_anthropic_adapter_refuses_arguments_out_of_range(arguments: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="must be >= 0, timeout and default_max_tokens"):
        AnthropicAdapter(api_key="k", **arguments)


@pytest.mark.parametrize(
    "arguments", [{"max_retries": -1}, {"retry_base_delay": -1}, {"timeout": 0}]
)
def test_the_openai_adapter_refuses_arguments_out_of_range(arguments: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="must be >= 0"):
        OpenAIAdapter(api_key="k", **arguments)


def test_an_anthropic_client_that_cannot_be_made_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(**kwargs: object) -> None:
        raise anthropic.AnthropicError("profile 'work' has no credentials")

    monkeypatch.setattr(anthropic, "AsyncAnthropic", broken)
    with pytest.raises(ConfigurationError, match="cannot create the Anthropic client: profile"):
        AnthropicAdapter(api_key="k")


@pytest.mark.parametrize(
    ("message", "named"),
    [
        (Message("user", [object()]), "cannot send content block"),  # type: ignore[list-item]
        (
            Message("user", [ToolResultBlock("c1", [ToolUseBlock("c2", "x", {})])]),
            "a tool result may hold only text and images",
        ),
    ],
)
async def test_anthropic_content_it_cannot_take_is_refused_before_sending(
    fake_server: FakeServer, message: Message, named: str
) -> None:
    async with anthropic_adapter_for(fake_server) as adapter:
        with pytest.raises(ConfigurationError, match=named):
            await adapter.chat([message], A_OPTIONS)
    assert fake_server.requests == []


async def test_an_anthropic_tool_use_without_an_id_is_a_provider_error(
    fake_server: FakeServer,
) -> None:
    fake_server.reply(200, reply_body([{"type": "tool_use", "name": "x", "input": {}}]))
    async with anthropic_adapter_for(fake_server) as adapter:
        with pytest.raises(ProviderError, match="tool_use block without id or name") as caught:
            await adapter.chat(A_HELLO, A_OPTIONS)
    assert caught.value.status == 200


async def test_a_success_body_that_is_no_json_is_named_so(fake_server: FakeServer) -> None:
    for adapter_for, hello, options in (
        (anthropic_adapter_for, A_HELLO, A_OPTIONS),
        (openai_adapter_for, O_HELLO, O_OPTIONS),
    ):
        fake_server.reply(200, b"<html>oops</html>")
        async with adapter_for(fake_server) as adapter:
            with pytest.raises(ProviderError, match="response body is not JSON") as caught:
                await adapter.chat(hello, options)
        assert caught.value.status == 200


async def test_an_anthropic_credentials_failure_is_an_authentication_error(
    fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(**kwargs: object) -> None:
        raise anthropic.CredentialsError("the token expired")

    async with anthropic_adapter_for(fake_server) as adapter:
        monkeypatch.setattr(adapter._client.messages, "create", refuse)
        with pytest.raises(AuthenticationError, match="the token expired"):
            await adapter.chat(A_HELLO, A_OPTIONS)


async def test_an_openai_image_without_data_or_url_is_refused_before_sending(
    fake_server: FakeServer,
) -> None:
    async with openai_adapter_for(fake_server) as adapter:
        with pytest.raises(ConfigurationError, match="an ImageBlock needs data or url"):
            await adapter.chat([Message("user", [ImageBlock("image/png")])], O_OPTIONS)
    assert fake_server.requests == []


async def test_an_openai_tool_call_without_a_name_is_a_provider_error(
    fake_server: FakeServer,
) -> None:
    call = {"id": "c1", "type": "function", "function": {"arguments": "{}"}}
    fake_server.reply(200, completion({"content": None, "tool_calls": [call]}))
    async with openai_adapter_for(fake_server) as adapter:
        with pytest.raises(ProviderError, match="tool call without a function name") as caught:
            await adapter.chat(O_HELLO, O_OPTIONS)
    assert caught.value.status == 200


async def test_an_assistant_text_turn_is_sent_without_tool_calls(fake_server: FakeServer) -> None:
    # Some compatible servers refuse an empty ``tool_calls`` list: a text turn sends none.
    fake_server.reply(200, O_TEXT_REPLY)
    conversation = [*O_HELLO, Message("assistant", [TextBlock("hi")]), *O_HELLO]
    async with openai_adapter_for(fake_server) as adapter:
        await adapter.chat(conversation, O_OPTIONS)
    body = fake_server.requests[0].body
    assert body["messages"][1] == {"role": "assistant", "content": "hi"}


async def test_an_openai_image_by_url_is_sent_as_its_url(fake_server: FakeServer) -> None:
    fake_server.reply(200, O_TEXT_REPLY)
    image = ImageBlock("image/png", url="https://example.test/cat.png")
    async with openai_adapter_for(fake_server) as adapter:
        await adapter.chat([Message("user", [image])], O_OPTIONS)
    [part] = fake_server.requests[0].body["messages"][0]["content"]
    assert part["image_url"]["url"] == "https://example.test/cat.png"

"""``OpenAIAdapter``: Chat Completions through the official ``openai`` SDK.

With ``base_url`` it talks to any OpenAI-compatible server (Ollama, vLLM, LM Studio, ...). Our
Anthropic-style blocks are mapped onto Chat Completions' shape: tool results become ``tool``
role messages and tool calls become ``tool_calls`` with JSON-string arguments. The SDK is imported
when an adapter is built, never when this module is.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from oma_actors.domain.messages import (
    ChatOptions,
    ContentBlock,
    ImageBlock,
    LLMResponse,
    Message,
    ReasoningBlock,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.errors import ConfigurationError, LLMError, OverloadedError, ProviderError
from oma_actors.llm.retry import error_for_status
from oma_actors.llm.sdk import PLACEHOLDER_KEY, SDKAdapter, describe, unparsed_arguments

if TYPE_CHECKING:
    from collections.abc import Sequence

    from openai import AsyncOpenAI, OpenAIError
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionContentPartParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
        ChatCompletionToolUnionParam,
    )
    from openai.types.chat.chat_completion_message_function_tool_call_param import Function

PROVIDER = "openai"
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_ERROR_PREFIX = "Error:"


class OpenAIAdapter(SDKAdapter):
    """An ``LLMAdapter`` for OpenAI Chat Completions and OpenAI-compatible servers.

    The SDK's own retries are off: failures are retried here (``max_retries`` times, with
    jittered exponential backoff that honours ``retry-after``) so every failure ends as a typed,
    counted ``LLMError``. Use ``async with`` (or ``aclose()``) to release the HTTP connections.

    With the defaults a call makes at most 4 attempts (1 + ``max_retries=3``) of at most 600 s
    each (the SDK's own timeout, 5 s of it to connect). A timed-out attempt is retried like an
    overload, as the SDK itself would; the provider may bill every attempt it answered, so lower
    ``max_retries`` or raise ``timeout`` for long, costly calls rather than let them repeat.

    Args:
        api_key: the API key; defaults to ``OPENAI_API_KEY``, or to a placeholder when
            ``base_url`` names a local server. It is masked in the adapter's error messages
            should the server echo it.
        base_url: an OpenAI-compatible endpoint, e.g. ``http://localhost:11434/v1`` for Ollama.
        max_retries: retries after the first attempt for retryable failures (rate limits,
            overloads, transient 4xx/5xx, timeouts, lost connections).
        retry_base_delay: the backoff unit in seconds.
        timeout: seconds allowed for one HTTP attempt; ``None`` keeps the SDK's default
            (600 s, 5 s to connect).

    Raises:
        ConfigurationError: the ``openai`` package is missing, no key was found for the official
            endpoint, or an argument is out of range.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 3,
        retry_base_delay: float = 0.5,
        timeout: float | None = None,
    ) -> None:
        if max_retries < 0 or retry_base_delay < 0 or (timeout is not None and timeout <= 0):
            raise ConfigurationError(
                "OpenAIAdapter: max_retries and retry_base_delay must be >= 0, timeout > 0"
            )
        try:
            import openai
        except ImportError as err:
            raise ConfigurationError(
                "the OpenAI adapter needs the openai SDK: pip install 'oma-actors[openai]'"
            ) from err
        if api_key is None and base_url is not None and not os.environ.get("OPENAI_API_KEY"):
            api_key = PLACEHOLDER_KEY
        self._provider = PROVIDER
        self._max_retries = max_retries
        self._retry_base_delay = retry_base_delay
        # The official API wants max_completion_tokens (reasoning models reject max_tokens);
        # compatible servers widely understand only max_tokens.
        self._official = base_url is None
        try:
            self._client: AsyncOpenAI = openai.AsyncOpenAI(
                api_key=api_key,
                base_url=base_url,
                max_retries=0,
                # The SDK reads timeout=None as "no timeout at all"; ours means its default.
                timeout=openai.DEFAULT_TIMEOUT if timeout is None else timeout,
            )
        except openai.OpenAIError as err:
            raise ConfigurationError(
                f"cannot create the OpenAI client: {err} (pass api_key=..., set OPENAI_API_KEY, "
                "or use base_url=... for a local server)"
            ) from err
        self._keep_secret(self._client.api_key)

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        """Send the conversation to Chat Completions and return the model's response.

        Args:
            messages: the conversation so far.
            options: model, system prompt, tools and ``max_tokens``.

        Returns:
            The response; ``stop_reason`` uses our (Anthropic's) names: ``end_turn``,
            ``tool_use``, ``max_tokens``; other finish reasons pass through verbatim.

        Raises:
            AuthenticationError: the key was rejected (401/403).
            RateLimitError: still rate-limited after all retries.
            OverloadedError: still overloaded, failing (5xx) or unreachable after all retries.
            ProviderError: a bad request or an unreadable response.
        """
        import openai

        request: list[ChatCompletionMessageParam] = []
        if options.system_prompt:
            request.append({"role": "system", "content": options.system_prompt})
        for message in messages:
            request.extend(_to_params(message))
        tools: list[ChatCompletionToolUnionParam] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in options.tools
        ]
        limit = options.max_tokens if options.max_tokens is not None else openai.omit
        official = self._official

        async def attempt() -> ChatCompletion:
            try:
                return await self._client.chat.completions.create(
                    model=options.model,
                    messages=request,
                    tools=tools if tools else openai.omit,
                    max_completion_tokens=limit if official else openai.omit,
                    max_tokens=openai.omit if official else limit,
                )
            except openai.OpenAIError as err:
                raise _to_llm_error(err) from err

        return _from_completion(await self._retried(attempt), options)


def _to_params(message: Message) -> list[ChatCompletionMessageParam]:
    if message.role == "assistant":
        return [_assistant_param(message)]
    # Tool results answer the preceding assistant's tool_calls, so their ``tool`` messages must
    # come first; whatever else the user message holds follows as one user message.
    params: list[ChatCompletionMessageParam] = []
    parts: list[ChatCompletionContentPartParam] = []
    for block in message.content:
        match block:
            case ToolResultBlock():
                params.append(
                    {
                        "role": "tool",
                        "tool_call_id": block.tool_use_id,
                        "content": _tool_result_text(block),
                    }
                )
            case TextBlock(text=text):
                parts.append({"type": "text", "text": text})
            case ImageBlock():
                parts.append({"type": "image_url", "image_url": {"url": _image_url(block)}})
            case ToolUseBlock():
                raise ConfigurationError("a user message cannot carry a tool call (ToolUseBlock)")
    if len(parts) == 1 and parts[0]["type"] == "text":
        # A plain string is what every compatible server understands.
        params.append({"role": "user", "content": parts[0]["text"]})
    elif parts:
        params.append({"role": "user", "content": parts})
    return params


def _assistant_param(message: Message) -> ChatCompletionMessageParam:
    texts: list[str] = []
    calls: list[ChatCompletionMessageFunctionToolCallParam] = []
    for block in message.content:
        match block:
            case TextBlock(text=text):
                texts.append(text)
            case ToolUseBlock(id=id_, name=name, input=input_):
                function: Function = {"name": name, "arguments": json.dumps(input_)}
                calls.append({"id": id_, "type": "function", "function": function})
            case ReasoningBlock():
                # Chat Completions takes no thinking back; it stays in our conversation only.
                continue
            case _:
                raise ConfigurationError(
                    f"an assistant message can hold only text and tool calls, not {block!r}"
                )
    content = "".join(texts)
    if not calls:
        return {"role": "assistant", "content": content}
    # With tool calls, no text is sent as null: some servers reject an empty string there.
    return {"role": "assistant", "content": content or None, "tool_calls": calls}


def _tool_result_text(block: ToolResultBlock) -> str:
    # A tool message holds text only, so rich results are flattened and images named.
    if isinstance(block.content, str):
        text = block.content
    else:
        pieces: list[str] = []
        for part in block.content:
            if isinstance(part, TextBlock):
                pieces.append(part.text)
            elif isinstance(part, ImageBlock):
                where = f": {part.url}" if part.url else ""
                pieces.append(f"[image {part.media_type}{where} omitted]")
        text = "\n".join(pieces)
    # Chat Completions has no is_error flag; the model learns of the failure from the text. The
    # tool layer's own error results already begin with the word, and need it only once.
    if block.is_error and not text.startswith(_ERROR_PREFIX):
        return f"{_ERROR_PREFIX} {text}"
    return text


def _image_url(image: ImageBlock) -> str:
    if image.data is not None:
        return f"data:{image.media_type};base64,{image.data}"
    if image.url is not None:
        return image.url
    raise ConfigurationError("an ImageBlock needs data or url")


def _from_completion(completion: ChatCompletion, options: ChatOptions) -> LLMResponse:
    """The response as our blocks (a call id the server omits is ``""``: the agent loop gives
    it, like one the server repeats, a fresh one: ``oma_actors.agents.call_ids``)."""
    # The SDK does not validate responses: missing fields arrive as None, so check by value.
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise ProviderError(PROVIDER, "response has no choices", status=200)
    message = getattr(choices[0], "message", None)
    content: list[ContentBlock] = []
    text = getattr(message, "content", None) or getattr(message, "refusal", None)
    if isinstance(text, str) and text:
        content.append(TextBlock(text))
    for call in getattr(message, "tool_calls", None) or []:
        if getattr(call, "type", None) == "function":
            content.append(_tool_use(call))
    finish = getattr(choices[0], "finish_reason", None)
    has_calls = any(isinstance(block, ToolUseBlock) for block in content)
    if has_calls and finish in (None, "stop"):
        # Several compatible servers report "stop" even when the model called tools.
        stop_reason = "tool_use"
    elif isinstance(finish, str):
        stop_reason = _STOP_REASONS.get(finish, finish)
    else:
        stop_reason = "end_turn"
    usage = getattr(completion, "usage", None)
    model = getattr(completion, "model", None)
    return LLMResponse(
        content,
        stop_reason=stop_reason,
        usage=TokenUsage(_count(usage, "prompt_tokens"), _count(usage, "completion_tokens")),
        model=model if isinstance(model, str) and model else options.model,
    )


def _tool_use(call: object) -> ToolUseBlock:
    """The call as a block; its id ``""`` when the server gave none."""
    function = getattr(call, "function", None)
    name = getattr(function, "name", None)
    raw = getattr(function, "arguments", None)
    if not isinstance(name, str):
        raise ProviderError(PROVIDER, "tool call without a function name", status=200)
    id_ = getattr(call, "id", None)
    return ToolUseBlock(id_ if isinstance(id_, str) else "", name, _arguments(raw))


def _arguments(raw: object) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    # Not a JSON object: keep the text so the tool layer can tell the model what went wrong.
    return unparsed_arguments(raw)


def _count(usage: object, name: str) -> int:
    value = getattr(usage, name, None)
    return value if isinstance(value, int) else 0


def _to_llm_error(err: OpenAIError) -> LLMError:
    import openai

    if isinstance(err, openai.APIStatusError):
        return error_for_status(PROVIDER, err.status_code, _status_message(err))
    if isinstance(err, openai.APIResponseValidationError):
        return ProviderError(PROVIDER, err.message, status=err.status_code)
    if isinstance(err, openai.APITimeoutError):
        return OverloadedError(PROVIDER, "request timed out")
    if isinstance(err, openai.APIConnectionError):
        return OverloadedError(PROVIDER, f"connection failed: {describe(err.__cause__ or err)}")
    return ProviderError(PROVIDER, str(err))


def _status_message(err: Any) -> str:
    # The SDK's message is "Error code: N - <body>"; the body's own message reads better.
    body = err.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(err.message)

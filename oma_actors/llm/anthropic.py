"""``AnthropicAdapter``: the Messages API through the official ``anthropic`` SDK.

Our content-block model is Anthropic's, so the request mapping is nearly one to one. The SDK is
imported when an adapter is built, never when this module is, so ``import oma_actors`` stays fast
and works without the ``anthropic`` extra.
"""

from __future__ import annotations

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
from oma_actors.errors import (
    AuthenticationError,
    ConfigurationError,
    LLMError,
    OverloadedError,
    ProviderError,
)
from oma_actors.llm.retry import error_for_status
from oma_actors.llm.sdk import PLACEHOLDER_KEY, SDKAdapter, describe, unparsed_arguments

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anthropic import AnthropicError, AsyncAnthropic
    from anthropic.types import (
        ImageBlockParam,
        MessageParam,
        TextBlockParam,
        ToolParam,
        ToolResultBlockParam,
    )
    from anthropic.types import Message as AnthropicMessage

PROVIDER = "anthropic"


class AnthropicAdapter(SDKAdapter):
    """An ``LLMAdapter`` for Anthropic's Messages API.

    The SDK's own retries are off: failures are retried here (``max_retries`` times, with
    jittered exponential backoff that honours ``retry-after``) so every failure ends as a typed,
    counted ``LLMError``. Use ``async with`` (or ``aclose()``) to release the HTTP connections.

    With the defaults a call makes at most 4 attempts (1 + ``max_retries=3``) of at most 600 s
    each (the SDK's own timeout, 5 s of it to connect). A timed-out attempt is retried like an
    overload, as the SDK itself would; the provider may bill every attempt it answered, so lower
    ``max_retries`` or raise ``timeout`` for long, costly calls rather than let them repeat.

    Args:
        api_key: the API key; defaults to the SDK's lookup (``ANTHROPIC_API_KEY``, profiles).
            It is masked in the adapter's error messages should the server echo it.
        base_url: another endpoint (a proxy, a compatible server); no key is then required.
        max_retries: retries after the first attempt for retryable failures (rate limits,
            overloads, transient 4xx/5xx, timeouts, lost connections).
        retry_base_delay: the backoff unit in seconds.
        timeout: seconds allowed for one HTTP attempt; ``None`` keeps the SDK's default
            (600 s, 5 s to connect).
        default_max_tokens: ``max_tokens`` when ``ChatOptions.max_tokens`` is unset (the API
            requires one).

    Raises:
        ConfigurationError: the ``anthropic`` package is missing, no credentials were found, or an
            argument is out of range.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 3,
        retry_base_delay: float = 0.5,
        timeout: float | None = None,
        default_max_tokens: int = 4096,
    ) -> None:
        bad_timeout = timeout is not None and timeout <= 0
        if max_retries < 0 or retry_base_delay < 0 or bad_timeout or default_max_tokens <= 0:
            raise ConfigurationError(
                "AnthropicAdapter: max_retries and retry_base_delay must be >= 0, "
                "timeout and default_max_tokens > 0"
            )
        try:
            import anthropic  # noqa: F401  (imported here, not at module level: it is slow)
        except ImportError as err:
            raise ConfigurationError(
                "the Anthropic adapter needs the anthropic SDK: pip install 'oma-actors[anthropic]'"
            ) from err
        self._provider = PROVIDER
        self._max_retries = max_retries
        self._retry_base_delay = retry_base_delay
        self._default_max_tokens = default_max_tokens
        self._client: AsyncAnthropic = _new_client(api_key, base_url, timeout)
        client = self._client
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            if base_url is None:
                raise ConfigurationError(
                    "no Anthropic credentials: pass api_key=..., set ANTHROPIC_API_KEY, "
                    "or use base_url=... for a server that needs none"
                )
            self._client = _new_client(PLACEHOLDER_KEY, base_url, timeout)
        self._keep_secret(self._client.api_key, self._client.auth_token)

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        """Send the conversation to the Messages API and return the model's response.

        Args:
            messages: the conversation so far.
            options: model, system prompt, tools and ``max_tokens``.

        Returns:
            The response; ``stop_reason`` is Anthropic's, verbatim.

        Raises:
            AuthenticationError: the key was rejected (401/403).
            RateLimitError: still rate-limited after all retries.
            OverloadedError: still overloaded, failing (5xx) or unreachable after all retries.
            ProviderError: a bad request or an unreadable response.
        """
        import anthropic

        request_messages = _to_params(messages)
        tools: list[ToolParam] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in options.tools
        ]

        async def attempt() -> AnthropicMessage:
            try:
                return await self._client.messages.create(
                    model=options.model,
                    max_tokens=self._default_max_tokens
                    if options.max_tokens is None
                    else options.max_tokens,
                    messages=request_messages,
                    system=options.system_prompt if options.system_prompt else anthropic.omit,
                    tools=tools if tools else anthropic.omit,
                )
            except anthropic.AnthropicError as err:
                raise _to_llm_error(err) from err

        message = await self._retried(attempt)
        return _from_message(message, options)


def _new_client(api_key: str | None, base_url: str | None, timeout: float | None) -> AsyncAnthropic:
    import anthropic

    try:
        # max_retries=0: we retry ourselves, so that every failure is typed and counted.
        return anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            # The SDK reads timeout=None as "no timeout at all"; ours means "the SDK's default".
            timeout=anthropic.DEFAULT_TIMEOUT if timeout is None else timeout,
        )
    except anthropic.AnthropicError as err:
        # e.g. a broken credentials profile named by ANTHROPIC_PROFILE
        raise ConfigurationError(f"cannot create the Anthropic client: {err}") from err


def _to_params(messages: Sequence[Message]) -> list[MessageParam]:
    params: list[MessageParam] = []
    for message in messages:
        content = [_block_param(block) for block in message.content if _sendable(block)]
        if message.role == "user":
            params.append({"role": "user", "content": content})
        elif content:
            params.append({"role": "assistant", "content": content})
        # else: an assistant turn with nothing to send (an empty reply: the model stopped at
        # once) is left out. The API refuses empty content in any but the final message (400),
        # and the user turns around it are joined into one by the API, as it documents.
    return params


def _sendable(block: ContentBlock) -> bool:
    # Thinking goes back with its signature, which the API checks; thinking without one (another
    # provider's) cannot be verified, and the API refuses the whole request for it. An empty
    # text block is refused too ("text content blocks must be non-empty") and says nothing.
    if isinstance(block, ReasoningBlock):
        return block.signature is not None
    return not isinstance(block, TextBlock) or block.text != ""


def _block_param(block: ContentBlock) -> Any:
    # Returns one of the SDK's block TypedDicts; which one depends on the block, hence Any.
    match block:
        case TextBlock(text=text):
            return _text_param(text)
        case ReasoningBlock(text=text, signature=signature):
            # Re-sent exactly as received: a tool turn's thinking must accompany its results.
            return {"type": "thinking", "thinking": text, "signature": signature}
        case ImageBlock():
            return _image_param(block)
        case ToolUseBlock(id=id_, name=name, input=input_):
            return {"type": "tool_use", "id": id_, "name": name, "input": input_}
        case ToolResultBlock():
            result: ToolResultBlockParam = {
                "type": "tool_result",
                "tool_use_id": block.tool_use_id,
                "is_error": block.is_error,
                "content": block.content
                if isinstance(block.content, str)
                else [_result_part(part) for part in block.content],
            }
            return result
    raise ConfigurationError(f"cannot send content block {block!r} to Anthropic")


def _result_part(part: ContentBlock) -> TextBlockParam | ImageBlockParam:
    if isinstance(part, TextBlock):
        return _text_param(part.text)
    if isinstance(part, ImageBlock):
        return _image_param(part)
    raise ConfigurationError(f"a tool result may hold only text and images, not {part!r}")


def _text_param(text: str) -> TextBlockParam:
    return {"type": "text", "text": text}


def _image_param(image: ImageBlock) -> ImageBlockParam:
    if image.data is not None:
        # The SDK types media_type as the four formats the API accepts; we pass the caller's
        # value through and let the API judge it.
        source: Any = {"type": "base64", "media_type": image.media_type, "data": image.data}
    elif image.url is not None:
        source = {"type": "url", "url": image.url}
    else:
        raise ConfigurationError("an ImageBlock needs data or url")
    return {"type": "image", "source": source}


def _from_message(message: AnthropicMessage, options: ChatOptions) -> LLMResponse:
    # The SDK does not validate responses: missing fields arrive as None and an unknown block
    # type is built as some other block class, so every field is checked by value, not by class.
    raw_blocks = getattr(message, "content", None)
    if not isinstance(raw_blocks, list):
        raise ProviderError(PROVIDER, "response has no content list", status=200)
    content: list[ContentBlock] = []
    for raw in raw_blocks:
        kind = getattr(raw, "type", None)
        if kind == "text":
            text = getattr(raw, "text", None)
            if isinstance(text, str):
                content.append(TextBlock(text))
        elif kind == "tool_use":
            content.append(_tool_use(raw))
        elif kind == "thinking":
            content.append(_thinking(raw))
        # redacted_thinking, server-tool and future blocks carry nothing the runner acts on,
        # so they are dropped.
    stop_reason = getattr(message, "stop_reason", None)
    if not isinstance(stop_reason, str):
        has_calls = any(isinstance(block, ToolUseBlock) for block in content)
        stop_reason = "tool_use" if has_calls else "end_turn"
    model = getattr(message, "model", None)
    return LLMResponse(
        content,
        stop_reason=stop_reason,
        usage=_usage(getattr(message, "usage", None)),
        model=model if isinstance(model, str) and model else options.model,
    )


def _tool_use(raw: object) -> ToolUseBlock:
    id_, name, input_ = (getattr(raw, key, None) for key in ("id", "name", "input"))
    if not isinstance(id_, str) or not isinstance(name, str):
        raise ProviderError(PROVIDER, "tool_use block without id or name", status=200)
    if not isinstance(input_, dict):
        # Hand the tool layer something it can reject with a message the model will see.
        input_ = unparsed_arguments(input_)
    return ToolUseBlock(id_, name, input_)


def _thinking(raw: object) -> ReasoningBlock:
    thinking, signature = getattr(raw, "thinking", None), getattr(raw, "signature", None)
    if not isinstance(thinking, str):
        raise ProviderError(PROVIDER, "thinking block without text", status=200)
    return ReasoningBlock(thinking, signature=signature if isinstance(signature, str) else None)


def _usage(usage: object) -> TokenUsage:
    def count(name: str) -> int:
        value = getattr(usage, name, None)
        return value if isinstance(value, int) else 0

    # Cached prompt tokens are billed input too; the API reports them apart from input_tokens.
    cached = count("cache_creation_input_tokens") + count("cache_read_input_tokens")
    return TokenUsage(count("input_tokens") + cached, count("output_tokens"))


def _to_llm_error(err: AnthropicError) -> LLMError:
    import anthropic

    if isinstance(err, anthropic.APIStatusError):
        if err.type == "overloaded_error":
            return OverloadedError(PROVIDER, err.api_message or err.message, status=err.status_code)
        return error_for_status(PROVIDER, err.status_code, err.api_message or err.message)
    if isinstance(err, anthropic.APIResponseValidationError):
        return ProviderError(PROVIDER, err.message, status=err.status_code)
    if isinstance(err, anthropic.APITimeoutError):
        return OverloadedError(PROVIDER, "request timed out")
    if isinstance(err, anthropic.APIConnectionError):
        return OverloadedError(PROVIDER, f"connection failed: {describe(err.__cause__ or err)}")
    if isinstance(err, anthropic.CredentialsError):
        return AuthenticationError(PROVIDER, str(err))
    return ProviderError(PROVIDER, str(err))

"""The exception tree of oma-actors.

::

    OmaError
    ├── ConfigurationError        bad options, unknown agents, misuse of the API
    ├── StoreError                a store could not do what was asked
    │   └── CorruptStoreError     a store's durable bytes are unreadable (never "empty")
    ├── CheckpointError           a checkpoint value is invalid
    │   ├── UnsupportedSchemaError
    │   └── RunIdMismatchError
    ├── DurableApprovalError      approval ledger failures, carrying a code
    ├── LeaseError                the run lease was lost or is held elsewhere
    ├── TaskGraphError            cycles, unknown dependencies, bad plans
    ├── ActorStoppedError         an actor stopped before it could answer
    ├── ActorFailedError          an actor under the escalate policy failed (cause: the error)
    ├── AskTimeoutError           an ask got no reply in time
    ├── MailboxFullError          a bounded mailbox refused a message
    ├── ToolInputError            a tool was called with input that fails its schema
    └── LLMError                  a model provider failed
        ├── AuthenticationError
        ├── RateLimitError        (retryable)
        ├── OverloadedError       (retryable)
        └── ProviderError         any other provider failure

Cancellation is never caught or wrapped by anything in this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


class OmaError(Exception):
    """Base class of every error raised by oma-actors."""


class ConfigurationError(OmaError):
    """Options or inputs contradict each other or name something that does not exist."""


class StoreError(OmaError):
    """A store operation failed."""


class CorruptStoreError(StoreError):
    """The durable bytes behind a store cannot be read; the store refuses to start empty."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class CheckpointError(OmaError):
    """A stored checkpoint value is invalid."""


class UnsupportedSchemaError(CheckpointError):
    """A checkpoint or plan uses a schema version this build cannot read."""

    def __init__(self, version: object, supported: Sequence[int]) -> None:
        super().__init__(
            f"unsupported checkpoint schema version {version!r} (supported: "
            f"{', '.join(str(v) for v in supported)})"
        )
        self.version = version
        self.supported = tuple(supported)


class RunIdMismatchError(CheckpointError):
    """A checkpoint belongs to a different run than the caller asked for."""

    def __init__(self, expected: str, found: str) -> None:
        super().__init__(
            f"checkpoint run id {found!r} does not match requested run id {expected!r}"
        )
        self.expected = expected
        self.found = found


class DurableApprovalError(OmaError):
    """A durable approval could not be recorded, found or validated."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class LeaseError(OmaError):
    """The run lease is held by another owner or was lost."""


class TaskGraphError(OmaError):
    """A task graph or plan is invalid: cycles, unknown references, duplicates."""

    def __init__(self, message: str, tasks: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.tasks = tuple(tasks)


class ActorStoppedError(OmaError):
    """The actor stopped (or its system shut down) before it answered."""


class ActorFailedError(OmaError):
    """An actor supervised with ``Supervision.escalate()`` failed; ``__cause__`` is its error."""

    def __init__(self, actor: str) -> None:
        super().__init__(f"actor {actor!r} failed and escalated; its system shut down")
        self.actor = actor


class AskTimeoutError(OmaError, TimeoutError):
    """An ask received no reply within its timeout."""


class MailboxFullError(OmaError):
    """A bounded mailbox is full and the sender asked not to wait."""


class ToolInputError(OmaError):
    """Model-issued tool input does not match the tool's input schema."""


class LLMError(OmaError):
    """A model provider call failed.

    Attributes:
        provider: the provider name (``"anthropic"``, ``"openai"``, ...).
        status: the HTTP status when there was one.
        retryable: whether the call may succeed if repeated.
    """

    retryable: bool = False

    def __init__(self, provider: str, message: str, *, status: int | None = None) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.status = status


class AuthenticationError(LLMError):
    """The provider rejected the credentials (HTTP 401/403)."""


class RateLimitError(LLMError):
    """The provider rate-limited the call (HTTP 429); retried with backoff."""

    retryable = True


class OverloadedError(LLMError):
    """The provider is overloaded or had a transient server error; retried with backoff."""

    retryable = True


class ProviderError(LLMError):
    """Any other provider failure (bad request, unexpected response)."""


__all__ = [
    "ActorFailedError",
    "ActorStoppedError",
    "AskTimeoutError",
    "AuthenticationError",
    "CheckpointError",
    "ConfigurationError",
    "CorruptStoreError",
    "DurableApprovalError",
    "LLMError",
    "LeaseError",
    "MailboxFullError",
    "OmaError",
    "OverloadedError",
    "ProviderError",
    "RateLimitError",
    "RunIdMismatchError",
    "StoreError",
    "TaskGraphError",
    "ToolInputError",
    "UnsupportedSchemaError",
]

"""Errors at the gRPC edge: one table from exception to canonical code and reason.

Every failure a client can see leaves through :func:`abort`: a canonical status code, a message,
a ``google.rpc.Status`` carrying ``google.rpc.ErrorInfo{reason, domain="oma.v1", metadata}`` in
``grpc-status-details-bin``, and the same reason as the ASCII trailer ``oma-error-reason`` for
clients without the googleapis protos. Codes exist only here (STYLE anti-pattern 9): the rest of
the sidecar raises ``SidecarError`` subclasses or lets ``OmaError``s through.

A store's error names its file (``STORE_FULL``, ``STORE_UNAVAILABLE``, ...). The file of the
sidecar's own store (``--store``, every run's store unless it names another) is the server's
business: every error sent names it ``DEFAULT_STORE`` instead (:func:`hide_path`), and the
whole message, path included, is logged for the operator.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from oma_actors import (
    CheckpointError,
    ConfigurationError,
    DurableApprovalError,
    LeaseError,
    OmaError,
    StoreError,
    TaskGraphError,
)
from oma_actors.errors import (
    CorruptStoreError,
    RunIdMismatchError,
    RunIdTakenError,
    StoreLimitError,
    UnsupportedSchemaError,
)
from oma_actors.readable import shorten

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

DOMAIN = "oma.v1"
REASON_TRAILER = "oma-error-reason"
logger = logging.getLogger(__name__)


class SidecarError(Exception):
    """A failure of a sidecar request, carrying its canonical code and reason."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(
        self, reason: str, message: str, *, metadata: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})


class InvalidArgument(SidecarError):
    """The request is malformed; ``field`` names the offending field."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, message: str, *, reason: str = "VALIDATION") -> None:
        super().__init__(reason, f"{field}: {message}", metadata={"field": field})
        self.field = field


def page_offset(token: str) -> int:
    """The offset a list RPC's ``page_token`` names (``""``: the first page).

    A token is the decimal offset a previous response gave, in ASCII digits only:
    ``str.isdigit()`` also takes ``"²"``, which ``int`` refuses (an INTERNAL error before).

    Raises:
        InvalidArgument: naming ``page_token``, for anything else.
    """
    if not token:
        return 0
    if not (token.isascii() and token.isdigit()) or len(token) > 9:
        raise InvalidArgument("page_token", "is not a token from a previous response")
    return int(token)


class NotFound(SidecarError):
    """An unknown run, approval or tool call."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(SidecarError):
    """The run id is taken by another StartRun request."""

    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(SidecarError):
    """The state of the resource forbids the request."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class OutOfRange(SidecarError):
    """A watch cursor points before the retained history."""

    code = grpc.StatusCode.OUT_OF_RANGE


class Unauthenticated(SidecarError):
    """A missing or wrong bearer token."""

    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(SidecarError):
    """The authenticated principal may not do this (a role it lacks, another's identity)."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unavailable(SidecarError):
    """A retryable condition: draining, an unreachable store, a missing optional module."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(SidecarError):
    """Stored state the request needs cannot be read (a corrupt record)."""

    code = grpc.StatusCode.DATA_LOSS


@dataclass(frozen=True, slots=True)
class Mapped:
    """The wire form of one error."""

    code: grpc.StatusCode
    reason: str
    message: str
    metadata: dict[str, str] = field(default_factory=dict)


# Order matters: the first matching class wins, so subclasses come before their bases.
_OMA_TABLE: tuple[tuple[type[OmaError], grpc.StatusCode, str], ...] = (
    (RunIdMismatchError, grpc.StatusCode.INVALID_ARGUMENT, "RUN_ID_CONFLICT"),
    (UnsupportedSchemaError, grpc.StatusCode.FAILED_PRECONDITION, "UNSUPPORTED_SCHEMA"),
    # ForkRun onto an id the store or the journal knows: StartRun's name for a taken id.
    (RunIdTakenError, grpc.StatusCode.ALREADY_EXISTS, "RUN_ALREADY_EXISTS"),
    (CheckpointError, grpc.StatusCode.DATA_LOSS, "CHECKPOINT_CORRUPT"),
    (CorruptStoreError, grpc.StatusCode.DATA_LOSS, "CHECKPOINT_CORRUPT"),
    # Not UNAVAILABLE: retrying the same write can never fit.
    (StoreLimitError, grpc.StatusCode.RESOURCE_EXHAUSTED, "STORE_FULL"),
    (StoreError, grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE"),
    (TaskGraphError, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_TASK_DEPENDENCIES"),
    (ConfigurationError, grpc.StatusCode.FAILED_PRECONDITION, "CONFIGURATION"),
)

# LeaseError carries its own code (RUN_LEASE_HELD, ...), which is also the reason.
_LEASE_CODES: dict[str, grpc.StatusCode] = {
    "RUN_NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "RUN_VALIDATION_ERROR": grpc.StatusCode.INVALID_ARGUMENT,
    "RUN_INTEGRITY_ERROR": grpc.StatusCode.DATA_LOSS,
    "RUN_ALREADY_TERMINAL": grpc.StatusCode.FAILED_PRECONDITION,
    "RUN_SUSPENDED": grpc.StatusCode.FAILED_PRECONDITION,
    "RUN_INVALID_TRANSITION": grpc.StatusCode.FAILED_PRECONDITION,
    "RUN_STORE_ATOMIC_REQUIRED": grpc.StatusCode.FAILED_PRECONDITION,
    "RUN_LEASE_HELD": grpc.StatusCode.ABORTED,
    "RUN_LEASE_LOST": grpc.StatusCode.ABORTED,
    "RUN_CONFLICT": grpc.StatusCode.ABORTED,
}

# DurableApprovalError carries its own code (APPROVAL_CONFLICT, ...).
_APPROVAL_CODES: dict[str, grpc.StatusCode] = {
    "APPROVAL_NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "APPROVAL_STALE_DECISION": grpc.StatusCode.FAILED_PRECONDITION,
    "APPROVAL_CONFLICT": grpc.StatusCode.FAILED_PRECONDITION,
    "APPROVAL_ATOMIC_STORE_REQUIRED": grpc.StatusCode.FAILED_PRECONDITION,
    "APPROVAL_VALIDATION_ERROR": grpc.StatusCode.INVALID_ARGUMENT,
    "APPROVAL_INTEGRITY_ERROR": grpc.StatusCode.DATA_LOSS,
    "APPROVAL_CONCURRENT_MODIFICATION": grpc.StatusCode.ABORTED,
}


MAX_MESSAGE_CHARS = 2000
"""The longest error message sent; a longer one is cut (it may quote a client's input)."""
MAX_METADATA_CHARS = 200
"""The longest ErrorInfo metadata value sent (ids a client chose, paths, ...)."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out.

    An error quoting a client's 1 MB id would otherwise be echoed whole into the trailers,
    which then exceed gRPC's metadata limit: the client saw RESOURCE_EXHAUSTED instead of the
    error (issue 24, item 8).
    """
    return shorten(text, limit, tell_rest=True)


DEFAULT_STORE = "<default store>"
"""How an error sent names the sidecar's own store file (``--store``)."""
_HIDDEN: Counter[str] = Counter()
"""The files named ``DEFAULT_STORE`` in errors: the own stores of the sidecars of this
process, each with how many of them hide it."""


def hide_path(path: str) -> Callable[[], None]:
    """Name ``path`` (the sidecar's own store file) ``DEFAULT_STORE`` in every error sent, as
    the files beside it (``<path>.lock``, ``<path>.journals/``); returns what undoes it.

    A client never sees where the server keeps its state: a tenant naming no store wrote no
    path, and one tenant's STORE_FULL must not tell the others the server's file layout. The
    message as it was is logged (WARNING), for the operator.
    """
    _HIDDEN[path] += 1

    def undo() -> None:
        _HIDDEN[path] -= 1
        if _HIDDEN[path] <= 0:
            del _HIDDEN[path]

    return undo


def _hidden(text: str) -> str:
    """``text`` with the own store files named ``DEFAULT_STORE`` (the longest path first)."""
    for path in sorted(_HIDDEN, key=len, reverse=True):
        text = text.replace(path, DEFAULT_STORE)
    return text


def map_error(exc: Exception) -> Mapped:
    """The code, reason and message of ``exc``, clipped (anything unexpected is INTERNAL).

    The sidecar's own store file is named ``DEFAULT_STORE`` (:func:`hide_path`).
    """
    mapped = _mapped(exc)
    message = _hidden(mapped.message)
    metadata = {key: _hidden(value) for key, value in mapped.metadata.items()}
    if message != mapped.message or metadata != mapped.metadata:
        logger.warning("%s (sent as %s): %s", mapped.reason, DEFAULT_STORE, mapped.message)
    return Mapped(
        mapped.code,
        mapped.reason,
        clip(message, MAX_MESSAGE_CHARS),
        {key: clip(value, MAX_METADATA_CHARS) for key, value in metadata.items()},
    )


def _mapped(exc: Exception) -> Mapped:
    if isinstance(exc, SidecarError):
        return Mapped(exc.code, exc.reason, exc.message, exc.metadata)
    if isinstance(exc, DurableApprovalError):
        code = _APPROVAL_CODES.get(exc.code, grpc.StatusCode.FAILED_PRECONDITION)
        return Mapped(code, exc.code, str(exc))
    if isinstance(exc, LeaseError):
        # An unknown code is a lease refusal of a newer build: retryable, like a held lease.
        code = _LEASE_CODES.get(exc.code, grpc.StatusCode.ABORTED)
        return Mapped(code, exc.code, exc.message)
    for kind, code, reason in _OMA_TABLE:
        if isinstance(exc, kind):
            return Mapped(code, reason, str(exc))
    return Mapped(grpc.StatusCode.INTERNAL, "INTERNAL", f"internal error: {type(exc).__name__}")


@dataclass(frozen=True, slots=True)
class RichStatus(grpc.Status):  # type: ignore[misc]  # grpc ships no type information
    """A ``grpc.Status`` for ``context.abort_with_status``: code, message, trailers."""

    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


def rich_status(mapped: Mapped) -> RichStatus:
    """The status an error ends its RPC with: ``google.rpc.Status`` + ``ErrorInfo``.

    grpcio-status turns the ``google.rpc.Status`` into the code, message and
    ``grpc-status-details-bin`` trailer; the plain reason trailer is added for clients without
    the googleapis protos.
    """
    info = error_details_pb2.ErrorInfo(
        reason=mapped.reason, domain=DOMAIN, metadata=mapped.metadata
    )
    status = status_pb2.Status(code=mapped.code.value[0], message=mapped.message)
    status.details.add().Pack(info)
    packed = rpc_status.to_status(status)
    return RichStatus(
        code=packed.code,
        details=packed.details,
        trailing_metadata=(*packed.trailing_metadata, (REASON_TRAILER, mapped.reason)),
    )


async def abort(context: grpc.aio.ServicerContext, exc: Exception) -> NoReturn:
    """End the RPC with the mapped status of ``exc`` (never returns)."""
    mapped = map_error(exc)
    if mapped.code is grpc.StatusCode.INTERNAL:
        logger.error("internal error in an RPC", exc_info=exc)
    await context.abort_with_status(rich_status(mapped))
    raise AssertionError(
        "context.abort_with_status returned"
    )  # pragma: no cover - abort always raises

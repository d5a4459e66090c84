"""The one table from errors to gRPC status: LeaseError by its code, never one code for all."""

from __future__ import annotations

import grpc
import pytest
from grpc_status import rpc_status

from oma_actors import LeaseError
from sidecar.client import error_info, error_reason
from sidecar.status import InvalidArgument, RichStatus, map_error, rich_status

LEASE_CODES = [
    ("RUN_NOT_FOUND", grpc.StatusCode.NOT_FOUND),
    ("RUN_VALIDATION_ERROR", grpc.StatusCode.INVALID_ARGUMENT),
    ("RUN_INTEGRITY_ERROR", grpc.StatusCode.DATA_LOSS),
    ("RUN_ALREADY_TERMINAL", grpc.StatusCode.FAILED_PRECONDITION),
    ("RUN_SUSPENDED", grpc.StatusCode.FAILED_PRECONDITION),
    ("RUN_INVALID_TRANSITION", grpc.StatusCode.FAILED_PRECONDITION),
    ("RUN_STORE_ATOMIC_REQUIRED", grpc.StatusCode.FAILED_PRECONDITION),
    ("RUN_LEASE_HELD", grpc.StatusCode.ABORTED),
    ("RUN_LEASE_LOST", grpc.StatusCode.ABORTED),
    ("RUN_CONFLICT", grpc.StatusCode.ABORTED),
]


@pytest.mark.parametrize(("code", "status"), LEASE_CODES, ids=[code for code, _ in LEASE_CODES])
def test_a_lease_error_maps_by_its_code_with_the_code_as_reason(
    code: str, status: grpc.StatusCode
) -> None:
    mapped = map_error(LeaseError(code, "run r-1 says no"))
    assert (mapped.code, mapped.reason) == (status, code)
    assert "run r-1 says no" in mapped.message


def test_an_unknown_lease_code_is_a_retryable_abort_with_its_own_reason() -> None:
    mapped = map_error(LeaseError("RUN_FROM_THE_FUTURE", "later"))
    assert (mapped.code, mapped.reason) == (grpc.StatusCode.ABORTED, "RUN_FROM_THE_FUTURE")


class _FailedCall:
    """What a client holds of a call that ended with ``status`` (the ``grpc.Call`` reads)."""

    def __init__(self, status: grpc.Status) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._status.trailing_metadata


def test_the_rich_status_round_trips_its_error_info() -> None:
    error = InvalidArgument("tasks[0].id", "empty")
    status = rich_status(map_error(error))
    call = _FailedCall(status)
    assert (status.code, status.details) == (grpc.StatusCode.INVALID_ARGUMENT, error.message)
    info = error_info(call)  # type: ignore[arg-type]
    assert info is not None
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "VALIDATION",
        "oma.v1",
        {"field": "tasks[0].id"},
    )
    assert error_reason(call) == "VALIDATION"  # type: ignore[arg-type]
    # The rich status must agree with the call's code: grpcio-status refuses one that does not.
    with pytest.raises(ValueError, match="doesn't match status code"):
        rpc_status.from_call(
            _FailedCall(
                RichStatus(grpc.StatusCode.INTERNAL, error.message, status.trailing_metadata)
            )
        )

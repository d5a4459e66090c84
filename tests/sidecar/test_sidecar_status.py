"""The one table from errors to gRPC status: LeaseError by its code, never one code for all."""

from __future__ import annotations

import grpc
import pytest

from oma_actors import LeaseError
from sidecar.status import map_error

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

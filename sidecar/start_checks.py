"""Checks of a ``StartRun`` that need more than the request: its retries, and its keys.

``convert.check_start`` validates a request on its own; these checks compare it with what is
stored already (a retry must be the same request) or with the run id it ends up with (its
checkpoint key must be this run's).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from oma_actors.keyspace import CHECKPOINT_KEY_PREFIX
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.status import AlreadyExists, InvalidArgument

if TYPE_CHECKING:
    from sidecar.record import RunView
    from sidecar.request_claims import RequestClaim


def request_digest(request: pb.StartRunRequest) -> str:
    """sha256 hex of ``request`` as received (deterministic serialization)."""
    return hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest()


def attach(request: pb.StartRunRequest, view: RunView) -> RunView:
    """The existing run a start request attaches to.

    A retry (the same ``request_id``) attaches only if it is the same request: the same id with
    another body is a client bug that would otherwise be told its new request was accepted.
    Another request attaches only with ``CONFLICT_POLICY_USE_EXISTING``.

    Raises:
        AlreadyExists: ``REQUEST_ID_REUSED`` for the same id with another body,
            ``RUN_ALREADY_EXISTS`` for another request without ``USE_EXISTING``.
    """
    record = view.record
    if record.request_id == request.request_id:
        if record.request_digest and record.request_digest != request_digest(request):
            raise _reused(request, record.run_id, " with another request body")
        return view
    if request.conflict_policy == pb.CONFLICT_POLICY_USE_EXISTING:
        return view
    raise AlreadyExists(
        "RUN_ALREADY_EXISTS",
        f"run {record.run_id!r} was started by another request",
        metadata={
            "existing_request_id": record.request_id,
            "existing_status": pb.RunStatus.Name(view.status),
        },
    )


def attach_retry(request: pb.StartRunRequest, view: RunView) -> RunView:
    """The run an earlier request with ``request``'s request_id started (``view``), for a start
    request whose own run id names no run.

    A request_id names one StartRun request, so it starts at most one run: a retry (no run id,
    or the run id it got) attaches as :func:`attach` says; the same request_id with another run
    id is another request under a used id, a client bug that would otherwise start a second
    run.

    Raises:
        AlreadyExists: ``REQUEST_ID_REUSED`` (metadata ``existing_run_id``) for another run id,
            or as :func:`attach`.
    """
    record = view.record
    if request.run_id and request.run_id != record.run_id:
        raise _reused(request, record.run_id, f", not run {request.run_id!r}")
    return attach(request, view)


def check_claimed(request: pb.StartRunRequest, claim: RequestClaim) -> None:
    """A start of a request_id whose claim names a run not written yet (``claim``) writes that
    run only if it is the same request, under the claimed run id (as :func:`attach_retry`).

    Raises:
        AlreadyExists: ``REQUEST_ID_REUSED`` for another run id or another request body.
    """
    if request.run_id and request.run_id != claim.run_id:
        raise _reused(request, claim.run_id, f", not run {request.run_id!r}")
    if claim.digest and claim.digest != request_digest(request):
        raise _reused(request, claim.run_id, " with another request body")


def _reused(request: pb.StartRunRequest, run_id: str, how: str) -> AlreadyExists:
    """The refusal of ``request``, whose request_id started run ``run_id`` ``how``."""
    return AlreadyExists(
        "REQUEST_ID_REUSED",
        f"request_id {request.request_id!r} started run {run_id!r}{how}; use a new "
        "request_id for a new request",
        metadata={"existing_run_id": run_id},
    )


def attach_own(request: pb.StartRunRequest, view: RunView, tenant: str) -> RunView:
    """Like :func:`attach`, for a start request of ``tenant`` naming an existing run id.

    A run of another tenant is never attached to, and nothing of it is told (not its request,
    not its status): the id is taken, and that is all.

    Raises:
        AlreadyExists: as :func:`attach`; ``RUN_ALREADY_EXISTS`` with no detail when the run is
            another tenant's.
    """
    if view.record.tenant != tenant:
        raise AlreadyExists("RUN_ALREADY_EXISTS", f"run id {view.run_id!r} is taken")
    return attach(request, view)


def check_checkpoint_key(key: str, run_id: str, *, assigned: bool) -> None:
    """An explicit checkpoint key must be one of this run's keys.

    A key is this run's when it lies under ``__oma_checkpoint__/<run_id>/``. Any other key could
    name another run's checkpoint, an approval row or a sidecar run record in the same store,
    which this run's saves would overwrite.

    Args:
        key: the requested key (empty: the default key, always this run's).
        run_id: the run's id.
        assigned: the server assigned ``run_id`` (the client could not have known it).

    Raises:
        InvalidArgument: the key is not under this run's prefix.
    """
    if not key:
        return
    prefix = f"{CHECKPOINT_KEY_PREFIX}{run_id}/"
    if assigned:
        raise InvalidArgument("checkpoint.key", "an explicit key needs an explicit run_id")
    if not key.startswith(prefix) or len(key) == len(prefix):
        raise InvalidArgument("checkpoint.key", f"must be one of this run's keys, under {prefix!r}")

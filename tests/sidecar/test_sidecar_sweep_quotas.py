"""Tenant run quotas under principals (helper's mutation sweep).

A fork counts against its parent's tenant, and a retried start found by its request_id (no run
id) is answered with its run even at the limit: both need the caller's tenant, not the tenant
of runs started without principals.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import grpc
from test_sidecar_history import fork, history
from test_sidecar_journal import echo_run, run_to_end
from test_sidecar_principals import TOKENS, principals_config
from test_sidecar_tenant_quotas import held_request, refused

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient, error_reason
from sidecar.server import Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@contextlib.asynccontextmanager
async def alice_at_one_run(tmp_path: Path) -> AsyncIterator[SidecarClient]:
    """alice's client (tenant acme) on a sidecar with principals, a file store (forks need its
    history) and a limit of one unfinished run per tenant."""
    config = principals_config(
        tmp_path, store_uri=f"file://{tmp_path / 'state.json'}", max_active_runs_per_tenant=1
    )
    async with Sidecar(config) as server, SidecarClient(server.address, TOKENS["alice"]) as alice:
        yield alice


async def test_a_fork_counts_against_its_parents_tenant(tmp_path: Path) -> None:
    async with alice_at_one_run(tmp_path) as alice:
        await run_to_end(alice, echo_run("parent"), progress=True)  # completed: not held
        at = (await history(alice, "parent"))[-1].seq
        child = await fork(alice, "parent", at, "child-1")  # INTERRUPTED until restored: held
        assert child.run.status == pb.RUN_STATUS_INTERRUPTED
        error = await refused(fork(alice, "parent", at, "child-2"))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(error) == "TOO_MANY_RUNS"


async def test_a_retry_by_request_id_at_the_limit_is_answered(tmp_path: Path) -> None:
    async with alice_at_one_run(tmp_path) as alice:
        request = held_request("")
        request.request_id = "acme-held"
        first = await alice.start_run(request)
        again = await alice.start_run(request)
        assert (again.run.run_id, again.created) == (first.run.run_id, False)
        error = await refused(alice.start_run(held_request("")))  # a new run: at the limit
        assert error_reason(error) == "TOO_MANY_RUNS"

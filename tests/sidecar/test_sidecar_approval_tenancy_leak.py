"""Approval lookups read only the caller's tenant's stores, and name only those.

``GetApproval``/``DecideApproval`` of an unknown id looked through the store of every run of
the sidecar: one tenant's lookup opened every other tenant's stores, and when one of them could
not be read, its ``STORE_UNAVAILABLE`` error named it (``file:///.../acme-merger.json``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, cast

import grpc
import pytest
from sidecar_helpers import run_request
from test_sidecar_approvals import suspended_run
from test_sidecar_principals import TOKENS, principals_config

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient, error_reason
from sidecar.record import RunRecordV1
from sidecar.server import Sidecar
from sidecar.stores import normalize_uri

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable
    from pathlib import Path

UNKNOWN = "apr_" + "0" * 32
SECRET = "acme-merger-with-initech.json"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Sidecar]:
    """A sidecar with principals whose tenant ``acme`` has a run on a store that cannot be
    read, and runs on SQLite stores nobody opened yet (their files do not exist)."""
    config = principals_config(tmp_path)
    (tmp_path / SECRET).write_text("{garbage")  # a damaged state file: it cannot be opened
    async with Sidecar(config) as sidecar:
        assert sidecar.registry is not None
        stores = [f"file://{tmp_path}/{SECRET}"]
        stores += [f"sqlite://{tmp_path}/acme-{index}.db" for index in range(3)]
        for index, uri in enumerate(stores):
            run_id = f"acme-{index}"
            record = RunRecordV1(
                run_id=run_id,
                request_id=f"q{index}",
                request=run_request(run_id),
                store_uri=normalize_uri(uri, field="f"),
                tenant="acme",
            )
            await sidecar.registry.create(record)
        yield sidecar


@pytest.fixture
async def clients(server: Sidecar) -> AsyncIterator[dict[str, SidecarClient]]:
    async with contextlib.AsyncExitStack() as stack:
        yield {
            name: await stack.enter_async_context(SidecarClient(server.address, TOKENS[name]))
            for name in ("alice", "bob")
        }


async def refused(call: Awaitable[object]) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


def get(client: SidecarClient) -> Awaitable[object]:
    request = pb.GetApprovalRequest(id=UNKNOWN)
    return cast(
        "Awaitable[object]", client.approvals.GetApproval(request, metadata=client.metadata)
    )


def decide(client: SidecarClient) -> Awaitable[object]:
    request = pb.DecideApprovalRequest(
        id=UNKNOWN, request_hash="0" * 64, decision=pb.DecideApprovalRequest.DECISION_APPROVE
    )
    call = client.approvals.DecideApproval(request, metadata=client.metadata)
    return cast("Awaitable[object]", call)


async def test_another_tenants_unreadable_store_is_neither_named_nor_opened(
    clients: dict[str, SidecarClient], tmp_path: Path
) -> None:
    bob = clients["bob"]  # tenant globex: no run on any of those stores
    for call in (get(bob), decide(bob)):
        error = await refused(call)
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert error_reason(error) == "APPROVAL_NOT_FOUND"
        assert SECRET not in (error.details() or "")
    assert await bob.list_approvals() == []
    # acme's stores were not opened for globex (opening a SQLite store creates its file).
    assert not any((tmp_path / f"acme-{index}.db").exists() for index in range(3))


async def test_the_tenant_of_the_unreadable_store_is_told_about_it(
    clients: dict[str, SidecarClient], tmp_path: Path
) -> None:
    alice = clients["alice"]  # tenant acme: the approval may be in its store that cannot be read
    for call in (get(alice), decide(alice)):
        error = await refused(call)
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert error_reason(error) == "STORE_UNAVAILABLE"
        assert SECRET in (error.details() or "")
    assert await alice.list_approvals() == []
    assert all((tmp_path / f"acme-{index}.db").exists() for index in range(3))  # read for acme


async def test_another_tenants_approval_is_answered_as_an_unknown_one(
    clients: dict[str, SidecarClient],
) -> None:
    # globex's run suspends on the sidecar's own store, which acme's lookups read too. With one
    # of acme's stores unreadable, an unknown id is STORE_UNAVAILABLE; globex's approval was
    # NOT_FOUND, so acme could tell that the id exists in another tenant.
    bob, alice = clients["bob"], clients["alice"]
    await asyncio.wait_for(suspended_run(bob, "globex-run"), 10)
    [approval] = await bob.list_approvals("globex-run")
    for call in (
        alice.approvals.GetApproval(pb.GetApprovalRequest(id=approval.id), metadata=alice.metadata),
        get(alice),
    ):
        error = await refused(call)
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert error_reason(error) == "STORE_UNAVAILABLE"

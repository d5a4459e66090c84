"""Which roles may call which RPC, when the server has principals (``sidecar.principals``).

One table of every RPC the server serves. An RPC missing from it is refused to everyone: a new
RPC must be classified here before a principal can call it (``tests/sidecar/test_sidecar_
principals.py`` checks the table covers the service descriptors).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sidecar.principals import Principal, Role

ANY: frozenset[Role] = frozenset()
"""Any authenticated principal."""
RUNS: frozenset[Role] = frozenset({"runs"})
REVIEW: frozenset[Role] = frozenset({"reviewer"})
SEE_APPROVALS: frozenset[Role] = frozenset({"runs", "reviewer"})
HOST: frozenset[Role] = frozenset({"host"})

METHOD_ROLES = MappingProxyType(
    {
        "/oma.v1.RunService/StartRun": RUNS,
        "/oma.v1.RunService/GetRun": RUNS,
        "/oma.v1.RunService/ListRuns": RUNS,
        "/oma.v1.RunService/WatchRun": RUNS,
        "/oma.v1.RunService/RestoreRun": RUNS,
        "/oma.v1.RunService/CancelRun": RUNS,
        "/oma.v1.RunService/DeleteRun": RUNS,
        "/oma.v1.RunService/GetRunTimeline": RUNS,
        "/oma.v1.RunService/GetRunHistory": RUNS,
        "/oma.v1.RunService/ForkRun": RUNS,
        "/oma.v1.ApprovalService/ListApprovals": SEE_APPROVALS,
        "/oma.v1.ApprovalService/GetApproval": SEE_APPROVALS,
        "/oma.v1.ApprovalService/DecideApproval": REVIEW,
        "/oma.v1.ToolHostService/Connect": HOST,
        "/oma.v1.ToolHostService/CompleteToolCall": HOST,
        "/oma.v1.SystemService/GetServerInfo": ANY,
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": ANY,
    }
)
"""Full method name -> the roles of which one is needed (empty: none)."""


def roles_for(method: str) -> frozenset[Role]:
    """The roles of which ``method`` needs one (empty for an unclassified method too)."""
    return METHOD_ROLES.get(method, ANY)


def allowed(method: str, caller: Principal) -> bool:
    """Whether ``caller`` may call ``method``; never an RPC missing from the table."""
    roles = METHOD_ROLES.get(method)
    if roles is None:
        return False
    return not roles or not roles.isdisjoint(caller.roles)

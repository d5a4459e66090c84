"""Tenants: a run belongs to the tenant of the principal that started it.

The tenant is stamped on the run record when ``StartRun`` creates it (``RunRecordV1.tenant``,
never changed afterwards): the one place it is kept. Every RPC that names a run, lists runs or
approvals, or carries a host tool call checks it here; a run of another tenant is answered as a
run that does not exist (NOT_FOUND): a caller learns nothing of it (not its status, spec,
events, approvals or tenant) but one thing, that its id is taken. Run ids are one namespace
across tenants, so ``StartRun`` naming another tenant's run id ends ALREADY_EXISTS /
``RUN_ALREADY_EXISTS`` ("run id 'x' is taken", no metadata), and so does ``ForkRun`` onto it as
``new_run_id``. A client that must not reveal its ids to other tenants leaves ``run_id`` empty
(the sidecar assigns a random one) or prefixes its ids unguessably. The tenant quotas
(``sidecar.quotas``) count the caller's own tenant only.

Without principals (the single shared token) there is no caller and every run is visible: runs
are created with the tenant ``""``. With principals, a run of tenant ``""`` (started before
principals were configured) belongs to no principal's tenant and is visible to none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.auth import bearer_credentials
from sidecar.record import NO_TENANT, UnknownRunError
from sidecar.status import Unauthenticated

if TYPE_CHECKING:
    from sidecar.principals import Principal, Principals
    from sidecar.record import RunRecordV1

__all__ = ["NO_TENANT", "Tenancy", "check_visible", "sees", "tenant_of"]


def tenant_of(caller: Principal | None) -> str:
    """The tenant a run started by ``caller`` belongs to."""
    return NO_TENANT if caller is None else caller.tenant


def sees(caller: Principal | None, tenant: str) -> bool:
    """Whether ``caller`` may see what belongs to ``tenant`` (no caller: no principals)."""
    return caller is None or caller.tenant == tenant


def check_visible(caller: Principal | None, record: RunRecordV1) -> RunRecordV1:
    """``record``, when ``caller`` may see it.

    Raises:
        UnknownRunError: the run is another tenant's (exactly as for a run that does not exist).
    """
    if not sees(caller, record.tenant):
        raise UnknownRunError(record.run_id)
    return record


class Tenancy:
    """Tells the servicers who calls (``None`` for every call when there are no principals)."""

    def __init__(self, principals: Principals | None = None) -> None:
        self._principals = principals

    def caller(self, context: Any) -> Principal | None:
        """The principal of the call in ``context``.

        The interceptor (``sidecar.auth``) already refused calls without a known token; this
        identifies the caller again from the same metadata rather than passing state around.

        Raises:
            Unauthenticated: no principal holds the call's token.
        """
        if self._principals is None:
            return None
        credentials = bearer_credentials(tuple(context.invocation_metadata() or ()))
        caller = None if credentials is None else self._principals.identify(credentials)
        if caller is None:
            raise Unauthenticated("UNAUTHENTICATED", "missing or invalid bearer token")
        return caller

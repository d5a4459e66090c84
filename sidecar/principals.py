"""Principals: who holds which token, for which tenant, with which roles.

``oma serve --principals FILE`` replaces the single shared token with a JSON list::

    [{"token": "...", "principal": "alice", "tenant": "acme", "roles": ["runs", "reviewer"]},
     {"token": "...", "principal": "tools-1", "tenant": "acme", "roles": ["host"]}]

A principal's tenant scopes every run it starts (``sidecar.tenancy``); its roles gate the RPCs
(``sidecar.access``). The file holds secrets, so one readable or writable by group or others is
refused, as is any entry that is not exactly those four fields, well formed.

A bearer token is compared with every entry's token in constant time and without stopping at a
match, so neither the time nor the path taken tells which entry (or whether any) matched.
"""

from __future__ import annotations

import hmac
import json
import os
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias, cast

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

Role: TypeAlias = Literal["runs", "reviewer", "host", "admin"]
ROLES: frozenset[Role] = frozenset({"runs", "reviewer", "host", "admin"})
FIELDS = frozenset({"token", "principal", "tenant", "roles"})
MAX_ENTRIES = 10_000


class PrincipalsError(ValueError):
    """The principals file cannot be used; the message names the file and the entry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """An authenticated caller: its name, its tenant and its roles (never its token)."""

    principal: str
    tenant: str
    roles: frozenset[Role]

    def has(self, role: Role) -> bool:
        """Whether the principal holds ``role``."""
        return role in self.roles


@dataclass(frozen=True, slots=True)
class _Entry:
    token: bytes = field(repr=False)
    principal: Principal


class Principals:
    """The principals of a server, looked up by bearer token."""

    def __init__(self, entries: Sequence[tuple[str, Principal]]) -> None:
        self._entries = tuple(_Entry(token.encode(), principal) for token, principal in entries)

    def __len__(self) -> int:
        return len(self._entries)

    def identify(self, credentials: bytes) -> Principal | None:
        """The principal whose token is ``credentials``, or ``None``.

        Every entry is compared (``hmac.compare_digest``), also after a match: the work does
        not depend on which entry matched.
        """
        found: Principal | None = None
        for entry in self._entries:
            if hmac.compare_digest(credentials, entry.token):
                found = entry.principal
        return found

    @classmethod
    def from_file(cls, path: Path) -> Principals:
        """Read and check a principals file.

        Raises:
            PrincipalsError: the file is readable or writable by group or others, is not a
                JSON list, or an entry is malformed (named by its index and principal).
            OSError: the file cannot be read.
        """
        mode = os.stat(path).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise PrincipalsError(
                f"principals file {path} is accessible by group or others "
                f"(mode {stat.S_IMODE(mode):04o}); chmod 600 it"
            )
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PrincipalsError(f"principals file {path} is not JSON: {exc}") from None
        return cls(parse_entries(document, source=str(path)))


def parse_entries(document: object, *, source: str) -> list[tuple[str, Principal]]:
    """The ``(token, principal)`` pairs of a parsed principals document.

    Raises:
        PrincipalsError: not a non-empty list of well-formed entries, or a token or principal
            name used twice.
    """
    if not isinstance(document, list) or not document:
        raise PrincipalsError(f"principals file {source} must hold a non-empty JSON list")
    if len(document) > MAX_ENTRIES:
        raise PrincipalsError(f"principals file {source} has more than {MAX_ENTRIES} entries")
    entries: list[tuple[str, Principal]] = []
    tokens: set[str] = set()
    names: set[str] = set()
    for index, raw in enumerate(document):
        token, principal = _entry(raw, f"{source}: entry {index}")
        where = f"{source}: entry {index} ({principal.principal!r})"
        if token in tokens:
            # The token itself is never echoed: the message may reach a log.
            raise PrincipalsError(f"{where}: its token is already used by an earlier entry")
        if principal.principal in names:
            raise PrincipalsError(f"{where}: the principal is already defined by an earlier entry")
        tokens.add(token)
        names.add(principal.principal)
        entries.append((token, principal))
    return entries


def _entry(raw: object, where: str) -> tuple[str, Principal]:
    if not isinstance(raw, dict):
        raise PrincipalsError(f"{where}: must be an object with {sorted(FIELDS)}")
    keys = set(raw)
    if keys != FIELDS:
        missing, extra = sorted(FIELDS - keys), sorted(map(str, keys - FIELDS))
        raise PrincipalsError(f"{where}: missing fields {missing}, unknown fields {extra}")
    name = raw["principal"]
    if not isinstance(name, str) or not name.strip():
        raise PrincipalsError(f"{where}: 'principal' must be a non-empty string")
    where = f"{where} ({name!r})"
    token, tenant, roles = raw["token"], raw["tenant"], raw["roles"]
    if not isinstance(token, str) or not token.strip():
        raise PrincipalsError(f"{where}: 'token' must be a non-empty string")
    if token != token.strip() or not token.isprintable() or not token.isascii():
        raise PrincipalsError(f"{where}: 'token' must be printable ASCII without outer spaces")
    if not isinstance(tenant, str) or not tenant.strip():
        raise PrincipalsError(f"{where}: 'tenant' must be a non-empty string")
    if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
        raise PrincipalsError(f"{where}: 'roles' must be a list of strings")
    unknown = sorted(set(roles) - ROLES)
    if unknown:
        raise PrincipalsError(f"{where}: unknown roles {unknown} (known: {sorted(ROLES)})")
    return token, Principal(
        principal=name, tenant=tenant, roles=frozenset(cast("list[Role]", roles))
    )
